"""The table and queues the service needs, created on an emulated AWS.

The same shapes the CDK stack declares (keys, the contacts index, TTL attribute,
DLQ redrive), for
the local runner and the tests.
"""

from __future__ import annotations

import json
from typing import Any

from adapters.compaction_queue import DLQ_MAX_RECEIVES
from adapters.contacts_index import CONTACT_ID_ATTRIBUTE, CONTACTS_INDEX, CONTACTS_SHARD_ATTRIBUTE
from adapters.dynamodb_store import TTL_ATTRIBUTE


def create_table(dynamodb: Any, name: str) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
            {"AttributeName": CONTACTS_SHARD_ATTRIBUTE, "AttributeType": "S"},
            {"AttributeName": CONTACT_ID_ATTRIBUTE, "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": CONTACTS_INDEX,
                "KeySchema": [
                    {"AttributeName": CONTACTS_SHARD_ATTRIBUTE, "KeyType": "HASH"},
                    {"AttributeName": CONTACT_ID_ATTRIBUTE, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.get_waiter("table_exists").wait(TableName=name)
    dynamodb.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )


def create_queues(sqs: Any, name: str, visibility_timeout_seconds: int = 30) -> tuple[str, str]:
    """The compaction queue and its dead-letter queue; returns both URLs."""
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout_seconds),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(DLQ_MAX_RECEIVES)}
            ),
        },
    )["QueueUrl"]
    return queue_url, dlq_url
