"""The A/B comparison's plan: its parameters and their checks, without numpy or pandas."""

from dataclasses import dataclass, field

from perflab.engine.controls import Controls, _cli, check_rows
from perflab.errors import PerflabError
from perflab.lab.plans.env_size import MAX_ARG_STRLEN


@dataclass(frozen=True)
class Plan(Controls):
    """Everything that decides which runs a comparison makes and how: a resume must match it."""

    a: str = ""
    b: str = ""
    digests: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    randomize: tuple[str, ...] = ("env-size",)
    setups: int = field(default=10, metadata=_cli("--setups", "Random setups to draw.", min=1))
    repeat: int = field(default=10, metadata=_cli("--repeat", "A/B pairs per setup.", min=1))
    env_max: int = field(
        default=4096,
        metadata=_cli("--env-max", "Env sizes are drawn in 0..ENV_MAX bytes.", min=0),
    )
    var: str = "A"

    def check(self, nobjects: int) -> "Plan":
        """Refuse bad input before anything is measured."""
        if self.setups < 1 or self.repeat < 1:
            raise PerflabError(
                f"--setups and --repeat must be at least 1 ({self.setups}, {self.repeat})"
            )
        check_rows({"--setups": self.setups, "--repeat": self.repeat}, 2)
        longest = MAX_ARG_STRLEN - len(self.var) - 2  # "VAR=" and the NUL count too
        if not 0 <= self.env_max <= longest:
            raise PerflabError(
                f"--env-max must be 0 to {longest} (Linux takes environment strings of at most "
                f"{MAX_ARG_STRLEN} bytes, MAX_ARG_STRLEN), not {self.env_max}"
            )
        if "link-order" in self.randomize and not nobjects:
            raise PerflabError(
                "--randomize link-order needs --build: perflab can relink only what it builds"
            )
        self.check_controls()
        return self
