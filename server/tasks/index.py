"""The ListTasks indexes: per scope, every task, by context and by state, newest status
change first, so a page costs O(log n + page size) at any store size.

The store keeps the tasks (an `IndexSource`); this module keeps, for each task it is told
about, where the task sits in the indexes. Status changes reach the indexes lazily: the store
marks a task `changed`, and changed tasks are re-indexed together before a page is read or
when `MAX_DIRTY` wait, so a task created and finished in between is indexed once. Page tokens
are opaque cursors (status time and id of the last task on the page). Synchronous, on the event
loop.

Everything kept per task is a plain tuple of strings and ints, which the garbage collector
stops tracking: a full store adds nothing to a collection's work.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar

from sortedcontainers import SortedList

from a2a_grpc.core.states import TERMINAL_STATES
from a2a_grpc.generated import a2a_pb2


class InvalidPageTokenError(ValueError):
    """A page token that this store did not issue."""


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """A ListTasks request after validation."""

    page_size: int
    """Tasks on the page at most."""
    page_token: str = ""
    """Where the page starts: the `next_page_token` of the page before ("": the first)."""
    context_id: str = ""
    """Only the tasks of this context ("": any)."""
    state: int = a2a_pb2.TASK_STATE_UNSPECIFIED
    """Only the tasks in this state (UNSPECIFIED: any)."""
    updated_after_ns: int = 0
    """Only the tasks whose status changed since this time, in ns since the epoch (0: any)."""
    history_length: int | None = None
    """Messages of each task's history kept, the last ones (None: all; 0: none)."""
    include_artifacts: bool = False
    """Whether each task keeps its artifacts (False: they are left out)."""


# An index entry orders tasks by last status change; the id breaks ties.
_Key = tuple[int, str]
IndexFacts = tuple[tuple[str, str], int, str, int]
"""What the indexes need of a task: (scope as a plain (tenant, owner) tuple, status time in
ns, context id, state)."""


class IndexSource(Protocol):
    """The store the indexes are over: the facts of a stored task, and its content for a page."""

    def index_facts(self, task_id: str) -> IndexFacts: ...

    def load_into(self, task_id: str, target: a2a_pb2.Task) -> None: ...


# Where a task sits in the indexes: (key, context id, state, scope).
_Entry = tuple[_Key, str, int, tuple[str, str]]
_Name = TypeVar("_Name", str, int)


class _LargeIndex(SortedList):  # type: ignore[misc]
    """A SortedList with shorter sublists than the library's default of 1000.

    The oldest entry leaves on every eviction of a full store, and deleting from a sublist moves
    every entry after it: with 1000-entry sublists that was ~4% of a blocking SendMessage's
    instructions (measured with callgrind). Lookups are still O(log n).
    """

    DEFAULT_LOAD_FACTOR = 128


def _new_index() -> SortedList:
    return _LargeIndex()


def _irange(
    keys: list[_Key],
    head: int,
    minimum: _Key,
    maximum: _Key | None,
    inclusive: tuple[bool, bool],
    reverse: bool,
) -> Iterator[_Key]:
    """SortedList.irange over a sorted list whose keys before `head` do not count; lazily, as
    SortedList's: a page reads a few keys of a range that may be long."""
    low = (bisect.bisect_left if inclusive[0] else bisect.bisect_right)(keys, minimum, lo=head)
    if maximum is None:
        high = len(keys)
    else:
        high = (bisect.bisect_right if inclusive[1] else bisect.bisect_left)(keys, maximum, lo=head)
    positions = range(high - 1, low - 1, -1) if reverse else range(low, high)
    return map(keys.__getitem__, positions)


class _SmallIndex(list[_Key]):
    """A sorted plain list with the few SortedList methods the store uses.

    Most contexts hold a handful of tasks; one of these costs one object where a SortedList
    costs five, which keeps cyclic garbage collection over a full store short (with a context
    holding one task as a bare key, 4 GC-tracked objects per task instead of 10: SendMessage
    p99 at c=256 went from 453 ms to ~150 ms). A context that outgrows `_SMALL_INDEX_LIMIT`
    entries is moved to a SortedList.
    """

    __slots__ = ()

    def add(self, key: _Key) -> None:
        bisect.insort(self, key)

    def remove(self, key: _Key) -> None:
        position = bisect.bisect_left(self, key)
        if position == len(self) or self[position] != key:
            raise ValueError(f"{key!r} not in index")
        del self[position]

    def discard(self, key: _Key) -> None:
        position = bisect.bisect_left(self, key)
        if position < len(self) and self[position] == key:
            del self[position]

    def bisect_left(self, key: _Key) -> int:
        return bisect.bisect_left(self, key)

    def irange(
        self,
        minimum: _Key,
        maximum: _Key | None = None,
        inclusive: tuple[bool, bool] = (True, True),
        reverse: bool = False,
    ) -> Iterator[_Key]:
        return _irange(self, 0, minimum, maximum, inclusive, reverse)


class _FinishedKeys:
    """The keys of finished tasks, oldest first, in a list they leave from the front.

    A finished task never changes again, and finished tasks reach the indexes in the order they
    finished (a catch-up adds its tasks in key order, and every key it adds is newer than any
    indexed before) and leave them in that order too (evictions take the oldest finished task
    first). So adding is an append and removing moves `head` on: no SortedList insert or delete
    for the two index entries every task adds and drops (all tasks, and its final state's).
    An out-of-order add or remove is still right, only slower (a bisect and a list insert or
    delete).
    """

    __slots__ = ("_head", "_keys")

    def __init__(self) -> None:
        self._keys: list[_Key] = []
        self._head = 0  # keys before it have left

    def __len__(self) -> int:
        return len(self._keys) - self._head

    def add(self, key: _Key) -> None:
        keys = self._keys
        if len(keys) > self._head and key < keys[-1]:
            bisect.insort(keys, key, lo=self._head)
        else:
            keys.append(key)

    def discard(self, key: _Key) -> None:
        keys, head = self._keys, self._head
        if head < len(keys) and keys[head] == key:
            head += 1
            if head >= _COMPACT_AT and head * 2 >= len(keys):
                del keys[:head]  # amortized: the list moves once per as many removals
                head = 0
            self._head = head
            return
        position = bisect.bisect_left(keys, key, lo=head)
        if position < len(keys) and keys[position] == key:
            del keys[position]

    def bisect_left(self, key: _Key) -> int:
        return bisect.bisect_left(self._keys, key, lo=self._head) - self._head

    def irange(
        self,
        minimum: _Key,
        maximum: _Key | None = None,
        inclusive: tuple[bool, bool] = (True, True),
        reverse: bool = False,
    ) -> Iterator[_Key]:
        return _irange(self._keys, self._head, minimum, maximum, inclusive, reverse)


_COMPACT_AT = 64
"""`_FinishedKeys` drops the keys that left once this many have, and half of its list."""


class _Keys:
    """All of a scope's tasks, by key: the unfinished ones in a SortedList, the finished ones in
    `_FinishedKeys`; read as one sorted set (a page merges the two)."""

    __slots__ = ("finished", "live")

    def __init__(self) -> None:
        self.live: SortedList = _new_index()
        self.finished = _FinishedKeys()

    def __len__(self) -> int:
        return len(self.live) + len(self.finished)

    def bisect_left(self, key: _Key) -> int:
        return int(self.live.bisect_left(key)) + self.finished.bisect_left(key)

    def irange(
        self,
        minimum: _Key,
        maximum: _Key | None = None,
        inclusive: tuple[bool, bool] = (True, True),
        reverse: bool = False,
    ) -> Iterator[_Key]:
        live = self.live.irange(minimum, maximum, inclusive, reverse)
        finished = self.finished.irange(minimum, maximum, inclusive, reverse)
        if not self.live:
            return finished
        if not self.finished:
            return iter(live)
        return heapq.merge(live, finished, reverse=reverse)


_SMALL_INDEX_LIMIT = 1024
_Entries: TypeAlias = "SortedList | _SmallIndex | _Keys | _FinishedKeys"
"""Any of the indexes a page walks: keys in order, `irange` and `bisect_left` as SortedList's."""
MAX_DIRTY = 256
"""Status changes that may wait before the indexes catch up (bounds a ListTasks call's work).
Catching up lazily saves 75k of the 518k instructions a blocking SendMessage costs when every
change is indexed at once (tests.load.instructions with this set to 1, 2026-11-30)."""


@dataclass(slots=True)
class _ScopeIndex:
    all: _Keys = field(default_factory=_Keys)
    size: int = 0  # tasks indexed (a counter: `len(all)` is three Python calls)
    # A context with one task holds its bare key (most contexts): no list object per context.
    by_context: dict[str, SortedList | _SmallIndex | _Key] = field(default_factory=dict)
    # A final state's tasks never change again: those states hold `_FinishedKeys`.
    by_state: dict[int, SortedList | _FinishedKeys] = field(default_factory=dict)


class TaskIndex:
    """The ListTasks indexes over the tasks of `source` (read when a task is re-indexed and
    when a page is filled)."""

    def __init__(self, source: IndexSource) -> None:
        self._source = source
        self._indexes: dict[tuple[str, str], _ScopeIndex] = {}
        self._scopes: dict[tuple[str, str], tuple[str, str]] = {}
        self._entries: dict[str, _Entry] = {}  # every indexed task
        self._dirty: dict[str, None] = {}  # tasks whose index entries are out of date

    def intern(self, scope: tuple[str, str]) -> tuple[str, str]:
        """The one plain (tenant, owner) tuple kept for a scope, shared by its tasks. Plain: the
        garbage collector stops tracking a tuple of strings, but not a Scope (a subclass)."""
        plain = (scope[0], scope[1])
        return self._scopes.setdefault(plain, plain)

    def changed(self, task_id: str) -> None:
        """A new task, or a status change: re-index it before the next page is read."""
        self._dirty[task_id] = None
        if len(self._dirty) >= MAX_DIRTY:
            self._flush()

    def forget(self, task_id: str) -> None:
        """The task leaves the store (call before or after the source lets it go)."""
        self._dirty.pop(task_id, None)
        self._index_remove(task_id)

    def count_by_state(self) -> dict[int, int]:
        """Indexed tasks per state, every scope together: O(scopes x states) once caught up."""
        self._flush()
        counts: dict[int, int] = {}
        for index in self._indexes.values():
            for state, entries in index.by_state.items():
                counts[state] = counts.get(state, 0) + len(entries)
        return counts

    def page(self, scope: tuple[str, str], query: TaskQuery) -> a2a_pb2.ListTasksResponse:
        """One page of the scope's tasks, most recently updated first.

        A page costs O(log n + page_size) for no filter, a context filter or a state filter
        (each has its own index); combining context and state walks the context's tasks.
        """
        response = a2a_pb2.ListTasksResponse(page_size=query.page_size)
        start = decode_page_token(query.page_token) if query.page_token else None
        self._flush()
        index = self._indexes.get(scope)
        if index is None:
            return response
        entries, predicate = self._choose_index(index, query)
        if entries is None:
            return response
        floor: _Key = (query.updated_after_ns, "")
        matching = self._count(entries, floor, predicate)
        response.total_size = matching
        page: list[str] = []
        for key in self._walk(entries, floor, start):
            task_id = key[1]
            if predicate is not None and not predicate(task_id):
                continue
            if len(page) == query.page_size:
                response.next_page_token = encode_page_token(self._entries[page[-1]][0])
                break
            page.append(task_id)
        load_into = self._source.load_into
        for task_id in page:
            task = response.tasks.add()
            load_into(task_id, task)
            if not query.include_artifacts:
                del task.artifacts[:]
            trim_history(task, query.history_length)
        return response

    # -- internals ------------------------------------------------------------------------

    # The indexes are updated inline (no helper generators, no throwaway SortedList per call):
    # three of these run on every status change, so they are on the hot path of every message.
    def _index_add(self, task_id: str, facts: IndexFacts) -> None:
        scope, updated_ns, context_id, state = facts
        key = (updated_ns, task_id)
        index = self._indexes.get(scope)
        if index is None:
            index = self._indexes[scope] = _ScopeIndex()
        finished = state in TERMINAL_STATES
        (index.all.finished if finished else index.all.live).add(key)
        index.size += 1
        if context_id:
            if context_id not in index.by_context:  # most contexts: a task of its own
                index.by_context[context_id] = key
            else:
                self._context_add(index, context_id, key)
        entries = index.by_state.get(state)
        if entries is None:
            entries = index.by_state[state] = _FinishedKeys() if finished else _new_index()
        entries.add(key)
        self._entries[task_id] = (key, context_id, state, scope)

    def _flush(self) -> None:
        dirty = self._dirty
        index_facts = self._source.index_facts
        changes = []
        entries = self._entries
        for task_id in dirty:
            if task_id in entries:  # not a new task
                self._index_remove(task_id)
            facts = index_facts(task_id)
            changes.append((facts[1], task_id, facts))
        # In key order (status time, id): `_FinishedKeys` then only ever appends (see there).
        changes.sort()  # tuples compare in C: no key function called per task
        for _, task_id, facts in changes:
            self._index_add(task_id, facts)
        dirty.clear()

    @staticmethod
    def _context_add(index: _ScopeIndex, context_id: str, key: _Key) -> None:
        by_context = index.by_context
        entries = by_context.get(context_id)
        if entries is None:
            by_context[context_id] = key
        elif isinstance(entries, tuple):
            by_context[context_id] = _SmallIndex(sorted((entries, key)))
        else:
            entries.add(key)
            if type(entries) is _SmallIndex and len(entries) > _SMALL_INDEX_LIMIT:
                by_context[context_id] = _LargeIndex(entries)

    @staticmethod
    def _context_remove(index: _ScopeIndex, context_id: str, key: _Key) -> None:
        entries = index.by_context.get(context_id)
        if isinstance(entries, tuple):
            if entries == key:
                del index.by_context[context_id]
        else:
            _discard(index.by_context, context_id, key)

    def _index_remove(self, task_id: str) -> None:
        entry = self._entries.pop(task_id, None)
        if entry is None:
            return
        key, context_id, state, scope = entry
        index = self._indexes[scope]
        if state in TERMINAL_STATES:
            index.all.finished.discard(key)
        else:
            index.all.live.remove(key)
        index.size -= 1
        if context_id:
            by_context = index.by_context
            if by_context.get(context_id) == key:  # a task of its own: its bare key
                del by_context[context_id]
            else:
                self._context_remove(index, context_id, key)
        if state in TERMINAL_STATES:
            # Kept when empty (no length call): it goes with its scope's index.
            index.by_state[state].discard(key)
        else:
            _discard(index.by_state, state, key)
        if not index.size:
            del self._indexes[scope]
            self._scopes.pop(scope, None)

    def _choose_index(
        self, index: _ScopeIndex, query: TaskQuery
    ) -> tuple[_Entries | None, Callable[[str], bool] | None]:
        if query.context_id:
            entries = index.by_context.get(query.context_id)
            if isinstance(entries, tuple):
                entries = _SmallIndex((entries,))
            if query.state:
                state = query.state
                indexed = self._entries
                return entries, lambda task_id: indexed[task_id][2] == state
            return entries, None
        if query.state:
            return index.by_state.get(query.state), None
        return index.all, None

    @staticmethod
    def _walk(entries: _Entries, floor: _Key, start: _Key | None) -> Iterator[_Key]:
        """Keys newest first, at or above `floor`, strictly older than `start` when given."""
        if start is None:
            return iter(entries.irange(minimum=floor, reverse=True))
        return iter(
            entries.irange(minimum=floor, maximum=start, inclusive=(True, False), reverse=True)
        )

    def _count(
        self,
        entries: _Entries,
        floor: _Key,
        predicate: Callable[[str], bool] | None,
    ) -> int:
        if predicate is None:
            return int(len(entries) - entries.bisect_left(floor))
        return sum(1 for key in entries.irange(minimum=floor) if predicate(key[1]))


def encode_page_token(key: tuple[int, str]) -> str:
    """The ListTasks page token after the task updated at `key[0]` (ns) with id `key[1]`; the
    same for every store, so a token from one replica works on another."""
    raw = f"{key[0]}:{key[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> tuple[int, str]:
    """The cursor in a token from `encode_page_token`; InvalidPageTokenError otherwise."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        stamp, _, task_id = raw.partition(":")
        if not task_id:
            raise ValueError(token)
        return int(stamp), task_id
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidPageTokenError(token) from exc


def _discard(indexes: dict[_Name, Any], name: _Name, key: _Key) -> None:
    entries = indexes.get(name)
    if entries is None:
        return
    entries.discard(key)
    if not entries:
        del indexes[name]


def trim_history(task: a2a_pb2.Task, history_length: int | None) -> None:
    """Keeps the last `history_length` messages (all when None)."""
    if history_length is None:
        return
    if history_length == 0:
        del task.history[:]
    elif len(task.history) > history_length:
        del task.history[: len(task.history) - history_length]
