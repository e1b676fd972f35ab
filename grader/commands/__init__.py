"""The course's commands, one module each, run as `python -m grader.commands.<name>` (the Makefile's targets).
For students: hint, inspect_step, check, debug, timeline, run_kernel; for instructors: bench, calibrate,
autograder. May import every layer below."""
