"""Tools for everyone: the environment doctor, JupyterLab, the demo.
"""
