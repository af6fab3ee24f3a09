"""HTTP targets: a tick task, storage bucket, deploy service, CloudEvent type, the ``message``
route or a job kind served by an HTTP endpoint in any language (docs/http-targets.md).

``cloudevent`` builds what a target receives, ``auth`` signs it, ``call`` makes the call within
the handler's budget, ``answer`` maps the answer onto the outcome table, and ``install`` is the
composition root's step that puts each declared target in the registry.
"""
