"""What reads or measures a kernel, shared by the grade and the commands: the static checks (features,
protocol_lint), the barrier protocol simulator (protocol), the instrumented builds (instrument, locator,
timeline), the comparison with cuBLAS (diagnosis) and the timing. A function here is handed a step's
kernel function; it never imports a step file itself. Imports only grader.core."""
