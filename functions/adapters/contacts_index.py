"""The contacts index: a sparse KEYS_ONLY global secondary index listing a tenant's contacts.

Its keys are written on the conversation's state item once, when a conversation
starts (never on every converse call), so only state items appear in it. The
partition key is the tenant plus a shard drawn from a hash of the contact id,
so one tenant's million contacts spread over 16 index partitions
(`CONTACTS_SHARDS`) instead of making one hot one; the sort key is the contact id.

Constants only: the CDK stack (infra/storage.py), the local table
(local/aws_resources.py) and the store all read them from here.
"""

from __future__ import annotations

CONTACTS_INDEX = "contacts"
CONTACTS_SHARD_ATTRIBUTE = "contactsShard"
"""The index's partition key (a string): the tenant and the contact's shard."""
CONTACT_ID_ATTRIBUTE = "contactId"
"""The index's sort key (a string): the contact id."""
CONTACTS_SHARDS = 16
