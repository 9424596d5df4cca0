"""Course authoring: the build of notebooks/, exercises/ and jobscripts/ from solutions/, the
student edition (`handson release student`), the translations' catalogues and the teaching
figures. Instructor-only.
"""
