"""The bundled suite data, installed as the package `tasks_lib.bundled` (pyproject.toml maps it here).

recall/ and retrieval/ ship in the wheel (find them with `tasks_lib.resources.bundled_folder`);
tasks/ does not: the task corpus is read from the git objects of a checkout.
"""
