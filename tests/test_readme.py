"""CI must run exactly the README's test command."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    legs = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert 'pip install ".[test]" && python -m pytest' in legs
    assert '\npip install ".[test]" && python -m pytest\n' in readme
