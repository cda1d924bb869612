import os

from app import build_app


def test_the_app_synthesises_offline_without_credentials(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path))
    assembly = build_app().synth()
    stack = assembly.get_stack_by_name("ConversationMemory")
    assert stack.template is not None
