"""Kernel-side helpers shared by the skeletons in steps/ and the reference solutions in solutions/."""
