"""Push notifications: the webhooks callers register for their tasks, and calling them.

The package owns three concerns, one module each, and imports only `core`: `configs` keeps each
task's push-notification configs in this process, with the protocol version each was registered
in (a shared store mirrors its own into it); `delivery` observes each task's status and artifact
updates and POSTs them to the task's webhooks in the background, in order and at least once;
`guard` is the SSRF guard, which decides the URLs and addresses a webhook may be called at and
makes a POST connect only where it checked. The push-config RPCs, with their checks and the cap
on configs per task, are the protocol's (`protocol/push_config_rpcs.py`)."""
