"""Chrome trace-event JSON (Kineto, chrome://tracing): one file or a folder of rank files."""
