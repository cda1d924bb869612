"""Template assertions for every concern of the stack (issue: the CDK stack)."""

from __future__ import annotations

import json
from typing import Any

from adapters.contacts_index import CONTACT_ID_ATTRIBUTE, CONTACTS_INDEX, CONTACTS_SHARD_ATTRIBUTE
from local.aws_resources import create_table
from tests.infra.conftest import flatten, of_type


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def only(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    (resource,) = of_type(resources, kind).values()
    properties: dict[str, Any] = resource["Properties"]
    return properties


def function(resources: dict[str, Any], handler: str) -> dict[str, Any]:
    (found,) = [
        r
        for r in of_type(resources, "AWS::Lambda::Function").values()
        if r["Properties"].get("Handler") == handler
    ]
    return dict(found)


HISTORY = "converse_history.handler.lambda_handler"
COMPACTOR = "compactor.handler.lambda_handler"


# -- storage ---------------------------------------------------------------------------


def test_the_table_has_ttl_pitr_encryption_and_is_kept_in_production(resources):
    (table,) = of_type(resources, "AWS::DynamoDB::GlobalTable").values()
    props = table["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["SSESpecification"]["SSEEnabled"] is True
    replica = props["Replicas"][0]
    assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert replica["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    keys = {k["AttributeName"]: k["KeyType"] for k in props["KeySchema"]}
    assert keys == {"PK": "HASH", "SK": "RANGE"}


def test_the_table_has_one_index_the_tenants_contacts_keys_only(resources):
    """SPEC 10: listing a tenant's contacts reads a sparse KEYS_ONLY index, whose keys the
    state item gets when a conversation starts; nothing else is projected or indexed."""
    (table,) = of_type(resources, "AWS::DynamoDB::GlobalTable").values()
    props = table["Properties"]
    (index,) = props["GlobalSecondaryIndexes"]
    assert index["IndexName"] == CONTACTS_INDEX == "contacts"
    keys = {k["AttributeName"]: k["KeyType"] for k in index["KeySchema"]}
    assert keys == {CONTACTS_SHARD_ATTRIBUTE: "HASH", CONTACT_ID_ATTRIBUTE: "RANGE"}
    assert keys == {"contactsShard": "HASH", "contactId": "RANGE"}
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    # On demand: the index has no capacity of its own to set.
    assert "WriteCapacitySettings" not in index
    assert "ReadCapacity" not in json.dumps(props["Replicas"])
    types = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
    assert types == {"PK": "S", "SK": "S", "contactsShard": "S", "contactId": "S"}


def test_the_local_table_declares_the_same_index_as_the_stack(resources):
    """local/aws_resources.py builds the table of `make run` and the integration tests:
    its index must be the one deployed, or the listing would pass locally and fail in AWS."""
    calls: list[dict[str, Any]] = []

    class Recorder:
        def create_table(self, **kwargs: Any) -> None:
            calls.append(kwargs)

        def get_waiter(self, name: str) -> Any:
            return type("Waiter", (), {"wait": staticmethod(lambda **_: None)})()

        def update_time_to_live(self, **kwargs: Any) -> None:
            pass

    create_table(Recorder(), "local")

    (local,) = calls
    (table,) = of_type(resources, "AWS::DynamoDB::GlobalTable").values()
    deployed = table["Properties"]
    assert local["BillingMode"] == deployed["BillingMode"] == "PAY_PER_REQUEST"
    assert local["GlobalSecondaryIndexes"] == deployed["GlobalSecondaryIndexes"]
    assert local["AttributeDefinitions"] == deployed["AttributeDefinitions"]


# -- compaction ------------------------------------------------------------------------


def test_the_queue_has_a_dlq_sse_and_a_visibility_of_six_compactor_timeouts(resources):
    queues = of_type(resources, "AWS::SQS::Queue")
    (main,) = [q["Properties"] for q in queues.values() if "RedrivePolicy" in q["Properties"]]
    assert 3 <= main["RedrivePolicy"]["maxReceiveCount"] <= 5
    compactor = function(resources, COMPACTOR)["Properties"]
    assert main["VisibilityTimeout"] >= 6 * compactor["Timeout"]
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
    policies = [
        flatten(p["Properties"]) for p in of_type(resources, "AWS::SQS::QueuePolicy").values()
    ]
    assert len(policies) == 2
    assert all('"aws:SecureTransport": "false"' in p for p in policies)


def test_the_compactor_reads_the_queue_reporting_batch_item_failures(resources):
    (mapping,) = of_type(resources, "AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BatchSize"] == 10
    assert props["MaximumBatchingWindowInSeconds"] == 5
    assert props["ScalingConfig"] == {"MaximumConcurrency": 5}


# -- functions -------------------------------------------------------------------------


def test_both_functions_run_python_3_13_on_arm64_traced_with_the_powertools_layer(
    template, resources
):
    parameters = template.to_json()["Parameters"]
    (layer_parameter,) = [
        name
        for name, p in parameters.items()
        if p.get("Default") == "/aws/service/powertools/python/arm64/python3.13/latest"
    ]
    assert parameters[layer_parameter]["Type"] == "AWS::SSM::Parameter::Value<String>"
    for handler in (HISTORY, COMPACTOR):
        props = function(resources, handler)["Properties"]
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Layers"] == [{"Ref": layer_parameter}]
        variables = props["Environment"]["Variables"]
        assert variables["HISTORY_WINDOW_MAX_TOKENS"] == "4000"
        assert variables["MEMORY_FOLD_MIN_TOKENS"] == "2000"
        assert variables["POWERTOOLS_SERVICE_NAME"] in {"converse-history", "compactor"}
    history = function(resources, HISTORY)["Properties"]["Environment"]["Variables"]
    assert history["RULES_SOURCE"] == "appconfig"
    assert history["CALLER_IDENTITY"] == "required"
    # Both send to the compaction queue: the compactor queues the rest of a long erase again.
    compactor = function(resources, COMPACTOR)["Properties"]["Environment"]["Variables"]
    assert compactor["COMPACTION_QUEUE_URL"] == history["COMPACTION_QUEUE_URL"]


def test_each_function_has_a_log_group_with_retention(resources):
    for handler in (HISTORY, COMPACTOR):
        logging = function(resources, handler)["Properties"]["LoggingConfig"]
        group = resources[logging["LogGroup"]["Ref"]]
        assert group["Properties"]["RetentionInDays"] == 30


def statements_of(resources: dict[str, Any], handler: str) -> list[dict[str, Any]]:
    role = function(resources, handler)["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = [
        p["Properties"]
        for p in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
    ]
    return [s for p in policies for s in p["PolicyDocument"]["Statement"]]


def actions_on(statements: list[dict[str, Any]]) -> dict[str, str]:
    found = {}
    for statement in statements:
        actions = as_list(statement["Action"])
        for action in actions:
            found[action] = flatten(statement["Resource"])
    return found


def grants(statements: list[dict[str, Any]], service: str) -> dict[str, set[str]]:
    """Resource (as text) -> every action of `service` granted on it."""
    found: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow", statement
        for resource in as_list(statement["Resource"]):
            actions = {a for a in as_list(statement["Action"]) if a.startswith(f"{service}:")}
            if actions:
                found.setdefault(flatten(resource), set()).update(actions)
    return found


def table_arn(resources: dict[str, Any]) -> str:
    (table,) = of_type(resources, "AWS::DynamoDB::GlobalTable")
    return flatten({"Fn::GetAtt": [table, "Arn"]})


def test_the_converse_role_has_exactly_its_table_actions_and_the_index_query(resources):
    """Converse, record, memory (SPEC 5, 7) and the data routes (SPEC 10): an export reads
    turns in batches, an erase deletes one by one and in batches, the contacts listing
    queries the index and nothing else does. TransactWriteItems needs its items' actions."""
    table = table_arn(resources)
    dynamodb = grants(statements_of(resources, HISTORY), "dynamodb")
    assert dynamodb == {
        table: {
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:BatchGetItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
        },
        f"{table}/index/contacts": {"dynamodb:Query"},
    }


def test_the_compactor_role_can_commit_a_fold_and_continue_an_erasure(resources):
    """The fold's commit is a transaction that updates the state and puts the fold's kept
    copy (adapters/dynamodb_fold_commit.py): without PutItem every fold would be refused.
    An erasure continued from the queue deletes, and re-enqueues what it cannot finish."""
    statements = statements_of(resources, COMPACTOR)
    assert grants(statements, "dynamodb") == {
        table_arn(resources): {
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:UpdateItem",
            "dynamodb:BatchGetItem",
            "dynamodb:PutItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
        },
    }
    sqs = grants(statements, "sqs")
    sends = [resource for resource, actions in sqs.items() if "sqs:SendMessage" in actions]
    (queue,) = [resource for resource, actions in sqs.items() if "sqs:ReceiveMessage" in actions]
    assert sends == [queue]  # its own queue, the one it reads; not the dead letters
    assert "CompactionQueue" in queue


def test_each_function_has_its_own_role_scoped_to_its_resources(resources):
    history_role = function(resources, HISTORY)["Properties"]["Role"]
    compactor_role = function(resources, COMPACTOR)["Properties"]["Role"]
    assert history_role != compactor_role
    history = actions_on(statements_of(resources, HISTORY))
    compactor = actions_on(statements_of(resources, COMPACTOR))
    table = "StorageTable"
    for action in ("dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"):
        assert table in history[action]
    assert "CompactionQueue" in history["sqs:SendMessage"]
    assert "configuration/" in history["appconfig:GetLatestConfiguration"]
    assert "bedrock:InvokeModel" not in history
    assert "foundation-model/amazon.nova-lite-v1:0" in compactor["bedrock:InvokeModel"]
    # The compactor's store calls: the state, the newer turns, the late ones, the commit
    # (an update and the fold's kept copy); an erasure's continuation deletes.
    for action in ("GetItem", "Query", "BatchGetItem", "UpdateItem", "PutItem", "DeleteItem"):
        assert table in compactor[f"dynamodb:{action}"]
    assert "CompactionQueue" in compactor["sqs:SendMessage"]  # an erasure continued
    assert "sqs:ReceiveMessage" in compactor
    assert "appconfig:GetLatestConfiguration" not in compactor


def test_no_statement_grants_a_wildcard_action(resources):
    for policy in of_type(resources, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = as_list(statement["Action"])
            assert all(a != "*" and not a.endswith(":*") for a in actions), statement


# Actions AWS defines on no resource: X-Ray's, and CloudWatch Logs' vended
# delivery (the state machine's logging).
RESOURCELESS = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


def test_only_actions_without_resources_get_a_wildcard_resource(resources):
    for policy in of_type(resources, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Resource"] == "*":
                assert set(as_list(statement["Action"])) <= RESOURCELESS, statement


# -- workflow --------------------------------------------------------------------------


def test_the_workflow_records_decides_asks_bedrock_and_records_the_reply(resources):
    machine = only(resources, "AWS::StepFunctions::StateMachine")
    text = flatten(machine["DefinitionString"])
    for state in (
        "RecordAndWindow",
        "Decision",
        "PublishEscalation",
        "AskTheModel",
        "RecordTheReply",
    ):
        assert f'"{state}"' in text
    assert "arn:aws:states:::aws-sdk:bedrockruntime:converse" in text or (
        ":states:::aws-sdk:bedrockruntime:converse" in text
    )
    assert ":states:::events:putEvents" in text
    assert '"DetailType":"ConversationEscalated"' in text
    assert '"Variable":"$.decision"' in text
    assert '"Messages.$":"$.model.input.Messages"' in text
    # The message's and the reply's ids are drawn once, before their tasks (retries store
    # each once), and only a recorded reply is an answer: a refusal fails the execution.
    assert text.count('"id.$":"States.UUID()"') == 2
    assert '"defaultMessageId.$":"$.messageName.id"' in text
    assert '"id.$":"$.replyName.id"' in text
    assert '{"Variable":"$.turn","IsPresent":true,"Next":"Answered"}' in text
    assert '"ReplyRecorded":{"Type":"Choice"' in text
    assert text.count('"Retry"') >= 4
    assert text.count('"Catch"') >= 4
    assert machine["TracingConfiguration"] == {"Enabled": True}
    assert machine["LoggingConfiguration"]["Level"] == "ALL"


def test_the_workflow_may_publish_to_its_bus_and_call_only_its_model(resources):
    role = only(resources, "AWS::StepFunctions::StateMachine")["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = actions_on(statements)
    assert "WorkflowBus" in actions["events:PutEvents"]
    assert "foundation-model/amazon.nova-lite-v1:0" in actions["bedrock:InvokeModel"]
    assert "ConverseHistory" in actions["lambda:InvokeFunction"]


# -- rules -----------------------------------------------------------------------------


def test_the_rules_profile_validates_deployments_with_the_repos_schema(resources):
    profile = only(resources, "AWS::AppConfig::ConfigurationProfile")
    (validator,) = profile["Validators"]
    assert validator["Type"] == "JSON_SCHEMA"
    schema = json.loads(validator["Content"])
    history_days = schema["definitions"]["tenant"]["properties"]["historyDays"]
    assert history_days["maximum"] == 30
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    version = only(resources, "AWS::AppConfig::HostedConfigurationVersion")
    assert "acme-legal" in json.loads(version["Content"])["tenants"]
    assert of_type(resources, "AWS::AppConfig::Deployment")
    strategy = only(resources, "AWS::AppConfig::DeploymentStrategy")
    assert strategy["GrowthType"] == "LINEAR"


# -- monitoring ------------------------------------------------------------------------


def test_alarms_watch_the_dlq_errors_coverage_gaps_and_latency(template, resources):
    alarms = [a["Properties"] for a in of_type(resources, "AWS::CloudWatch::Alarm").values()]
    names = {a.get("MetricName") for a in alarms}
    assert {"ApproximateNumberOfMessagesVisible", "Errors", "CoverageGaps", "Duration"} <= names
    assert sum(1 for a in alarms if a.get("MetricName") == "Errors") == 2
    (gaps,) = [a for a in alarms if a.get("MetricName") == "CoverageGaps"]
    assert gaps["Namespace"] == "ConversationMemory"
    assert gaps["Threshold"] == 0
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm", {"MetricName": "Duration", "ExtendedStatistic": "p99"}
    )


def test_the_dashboard_shows_the_memorys_figures(resources):
    body = flatten(only(resources, "AWS::CloudWatch::Dashboard")["DashboardBody"])
    for metric in (
        "HistoryMessagesKept",
        "HistoryMessagesDropped",
        "HistoryMessagesTrimmed",
        "FragmentRepairs",
        "WorkflowInputsShortened",
        "WindowTokens",
        "Escalations",
        "CompactionsEnqueued",
        "FoldDuration",
        "SummariserInputTokens",
        "SummariserOutputTokens",
    ):
        assert metric in body


def test_outputs_name_what_a_caller_needs(template):
    outputs = template.to_json()["Outputs"]
    assert {"ApiUrl", "StateMachineArn", "TableName", "EventBusName"} <= set(outputs)
