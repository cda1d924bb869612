import os

from hypothesis import HealthCheck, Phase, settings

from local import moto_dynamodb
from tests.support import reliability

# The emulation as `make run` serves it: moto's DynamoDB without its per-call growth.
moto_dynamodb.install()

# Wall-clock deadlines make property tests flaky on noisy machines; speed is
# measured by `make bench`, never asserted here.
settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("deep", parent=settings.get_profile("default"), max_examples=2000)
# make mutation: the same examples on every run and no example database, so a mutant's
# verdict does not depend on the runs before it; no shrinking, since any failure kills it;
# a quarter of the examples, since a mutant runs its tests again and again (docs/mutation.md).
settings.register_profile(
    "mutation",
    parent=settings.get_profile("default"),
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    max_examples=25,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Powertools reads these at import; tests never send traces or metrics anywhere.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "conversation-memory-tests")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ConversationMemoryTests")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def pytest_sessionfinish(session, exitstatus):
    reliability.write()
