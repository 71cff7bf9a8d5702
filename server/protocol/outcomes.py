"""What the answers to messages were, counted for metrics: direct replies against tasks, the
artifacts a finished task holds, finished tasks without any, and the chunks each artifact came
in, by the skill a run names (`TaskEvents.use_skill`). Read when /metrics is scraped
(server/ops/metrics.py)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2

NO_SKILL = "(none)"
"""The skill label of a run that named none."""
OTHER_SKILL = "(other)"
"""The skill label of a run that named an id the card does not list (bounded label values)."""
ARTIFACT_BUCKETS = (0, 1, 2, 5, 10, 100)
"""Upper bounds of the artifacts-per-finished-task histogram's buckets; +Inf follows."""
CHUNK_BUCKETS = (1, 2, 5, 10, 50, 100, 500, 1000)
"""Upper bounds of the chunks-per-artifact histogram's buckets; +Inf follows."""


@dataclass
class _SkillCounts:
    direct_replies: int = 0
    tasks: int = 0
    """Answers that were a task (a run that settled with one), direct replies apart."""
    finished: int = 0
    artifacts: int = 0
    """Artifacts held by the finished tasks, summed."""
    artifact_buckets: list[int] = field(default_factory=lambda: [0] * (len(ARTIFACT_BUCKETS) + 1))
    without_artifacts: dict[str, int] = field(default_factory=dict)
    """Finished tasks holding no artifact, by final state name."""
    chunks: int = 0
    """The chunks of the artifacts runs finished (a whole artifact: 1), summed; how many
    artifacts that is, and how many chunks each, is in `chunk_buckets`."""
    chunk_buckets: list[int] = field(default_factory=lambda: [0] * (len(CHUNK_BUCKETS) + 1))


class Outcomes:
    """Counts each settled run once (`observe`). `skills` are the card's skill ids; a run that
    names another is counted under OTHER_SKILL. Not thread-safe: the server's loop only."""

    def __init__(self, skills: Iterable[str]) -> None:
        self._skills = frozenset(skills)
        self.by_skill: dict[str, _SkillCounts] = {}

    def observe(
        self,
        skill: str,
        *,
        direct_reply: bool,
        state: int,
        artifacts: int,
        whole_artifacts: int = 0,
        chunked_artifacts: tuple[int, ...] = (),
    ) -> None:
        """A run settled: with a direct reply, or at `state` with the task holding `artifacts`
        artifacts (counted as finished when `state` is terminal), having recorded
        `whole_artifacts` artifacts in one chunk each and finished streamed ones of
        `chunked_artifacts` chunks each."""
        label = skill if skill in self._skills else (OTHER_SKILL if skill else NO_SKILL)
        counts = self.by_skill.get(label)
        if counts is None:
            counts = self.by_skill[label] = _SkillCounts()
        if direct_reply:
            counts.direct_replies += 1
            return
        counts.tasks += 1
        if whole_artifacts:  # one chunk each: the first bucket
            counts.chunks += whole_artifacts
            counts.chunk_buckets[0] += whole_artifacts
        for count in chunked_artifacts:
            counts.chunks += count
            counts.chunk_buckets[bisect_left(CHUNK_BUCKETS, count)] += 1
        if state not in TERMINAL_STATES:
            return
        counts.finished += 1
        counts.artifacts += artifacts
        counts.artifact_buckets[bisect_left(ARTIFACT_BUCKETS, artifacts)] += 1
        if not artifacts:
            name = str(a2a_pb2.TaskState.Name(state)).removeprefix("TASK_STATE_").lower()
            counts.without_artifacts[name] = counts.without_artifacts.get(name, 0) + 1
