"""What every other layer stands on: the step table (steps), the compile pipeline TIRx -> CUDA -> PTX ->
cubin -> SASS (build), and the processes' fences: course copies, the file check, time limits (sandbox).
Imports nothing else of the grader."""
