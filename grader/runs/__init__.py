"""The child processes that import or run a student's code, each with the function that starts it: the build
(build_child), the GPU run (gpu_child), the deadlock locator's debug run (debug_child), the measured timeline
(timeline_child). Each starts in a fresh copy of the course, under the file check. Imports grader.core and
grader.analysis."""
