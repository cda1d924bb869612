"""The one stack users deploy with `cdk deploy`.

It composes one construct per concern (storage, compaction, API, workflow,
rules config, monitoring); each arrives with the part of the service it hosts.
"""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct


class ConversationMemoryStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
