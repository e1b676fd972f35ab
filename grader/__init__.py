"""The course grader: build -> static checks -> correctness -> speed -> report. Run `python -m grader --help`."""
