"""The grade: options (cli), one step's orchestration and verdict (grade), the report (report). Never imports
a student's file: it starts grader.runs children and judges what they return. Imports grader.core,
grader.analysis and grader.runs."""
