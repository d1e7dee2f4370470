"""Qt-free recorder: runs a command and records counters and profiles around it."""
