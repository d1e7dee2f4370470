"""XProf / TensorBoard profile ``*.xplane.pb`` (XSpace protobuf)."""
