"""The top layer: the `edgeroute` command (:mod:`edgeroute.cli`) and the node's ASGI app, the
router's API with the dashboard mounted on it (:func:`edgeroute.app.create_app`).

Everything is assembled here so that every import points down to dashboard, router, edge,
cloud and models. Importing the package loads neither (each module imports what it assembles).
"""
