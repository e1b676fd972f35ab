"""`make grade-class`: a whole class graded as `make grade` grades one student in instructor mode.

`python -m grader.commands.grade_class grade SUBMISSIONS --out OUT` takes a Gradescope submissions export or a
folder of per-student zips or folders (intake), grades each student in a process of its own that runs the
one-student grade (`python -m grader --instructor`) over a fresh course copy holding that student's files (task),
on the GPUs of this machine (local) or as a Slurm job array (slurm), and writes per student Gradescope's
results.json, the grader's JSON report and a log per step, then the class's gradebook, leaderboard, failures,
manifest and similarity report (summary, similarity). Each student's result is written whole and keyed by the
submission's content, the grader's version and the GPU model (store): a rerun grades only what is missing or
changed.
"""
