"""The storage handler: a GCS notification -> the processor its rule names, recorded.

OBJECT_FINALIZE with a matching rule: read the generation (pinned, verified), run the processor,
record the run in ``processed_files``. Deleted or superseded before it was read: ``skipped``,
acknowledged. No rule: skipped with the reason. Deletes, archives and metadata updates are
recorded by the inbox and acknowledged, unless a rule names them.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, NoReturn

from consumer.config.storage_rules import Rule, Rules, load_rules
from consumer.errors import Incomplete, LeaseLost, Permanent, Skip
from consumer.observe import metrics
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.extensions import Processors
from consumer.pipeline.registry import Registry
from consumer.storage.budget import BudgetExhausted, Pacer
from consumer.storage.continued import HandedOn, hand_on
from consumer.storage.durable import durably
from consumer.storage.import_jobs import import_jobs, importer
from consumer.storage.model import FINAL, FileResult, FileStatus, StoredObject
from consumer.storage.processors import FileInput, Processor, processor_named
from consumer.storage.reader import ObjectStore, ObjectUnavailable
from consumer.storage.store import ProcessedFiles
from consumer.wire.events import StorageEvent, StorageEventType
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.storage")
FINALIZE = StorageEventType.OBJECT_FINALIZE


class StorageHandler:
    """The registry's storage handler. ``processors`` is the registry's processor table (a table
    of its own, with the built-in ``import-jobs``, when built without one)."""

    def __init__(
        self, objects: ObjectStore | None = None, processors: Processors | None = None
    ) -> None:
        if processors is None:
            processors = Processors()
            processors.add("import-jobs", import_jobs)
        self.processors = processors
        self.objects = objects or ObjectStore()

    def __call__(self, context: HandlerContext, event: StorageEvent) -> dict[str, Any]:
        rules = load_rules(context.settings.storage.rules)
        obj = self._typed(rules, event)
        content_type = obj.content_type if obj else event.content_type
        rule = rules.select(event.event_type, event.bucket, event.name, content_type)
        if rule is None and event.event_type is FINALIZE:
            raise Skip(f"no storage rule matches gs://{event.bucket}/{event.name}")
        if rule is None:
            return {"recorded": event.event_type.value, "object": _named(event).url}
        processor = processor_named(self.processors, rule.processor)
        if event.event_type is not FINALIZE:
            return self._notify(context, event, rule, processor)
        return self._process(context, event, rule, processor, obj)

    def _typed(self, rules: Rules, event: StorageEvent) -> StoredObject | None:
        """The object's metadata, read first when the event lacks the content type a rule
        asks about (``payloadFormat`` NONE); ``None`` when the event is enough."""
        if event.event_type is not FINALIZE or event.content_type:
            return None
        if not rules.need_content_type(event.event_type, event.bucket, event.name):
            return None
        try:
            return self.objects.stat(event.bucket, event.name, int(event.generation))
        except ObjectUnavailable as gone:
            raise Skip(str(gone)) from None

    def _notify(
        self, context: HandlerContext, event: StorageEvent, rule: Rule, processor: Processor
    ) -> dict[str, Any]:
        """A rule asked for a non-finalize event: the processor runs without content."""
        file = FileInput(
            event, _named(event), rule.options, context, Pacer(context),
            ProcessedFiles(context.engine), owner="",
        )  # fmt: skip
        result = processor(file)
        return {"event": event.event_type.value, "status": result.status.value, **result.details}

    def _process(
        self,
        context: HandlerContext,
        event: StorageEvent,
        rule: Rule,
        processor: Processor,
        known: StoredObject | None,
    ) -> dict[str, Any]:
        files = ProcessedFiles(context.engine)
        owner = uuid.uuid4().hex
        obj = known or self._stat(files, event, rule, owner, context.clock)
        row = files.begin(obj, rule.processor, owner, context.clock())
        if row.status in FINAL:
            return {"outcome": "already processed", **row.summary()}
        file = FileInput(
            event, obj, rule.options, context, Pacer(context), files, owner, row.progress
        )
        try:
            checksum, result = self._run(file, processor, rule)
        except HandedOn as handed:
            return handed.summary(files, obj)
        _finish(file, result, checksum)
        metrics.file_processed(rule.processor, result, file.resumed)
        log.info("file processed", extra={"file": obj.url, "status": result.status.value})
        finished = files.get(obj.bucket, obj.name, obj.generation)
        return finished.summary() if finished else {}

    def _stat(
        self, files: ProcessedFiles, event: StorageEvent, rule: Rule, owner: str, clock: Clock
    ) -> StoredObject:
        """The generation's metadata; skipped (and recorded, as its owner) if it cannot be read
        any more."""
        try:
            return self.objects.stat(event.bucket, event.name, int(event.generation))
        except ObjectUnavailable as gone:
            named = _named(event)
            if files.begin(named, rule.processor, owner, clock()).status not in FINAL:
                files.record_skip(named, owner, str(gone), clock())
            raise Skip(str(gone)) from None

    def _run(self, file: FileInput, processor: Processor, rule: Rule) -> tuple[str, FileResult]:
        """Spool the verified content and run the processor; record failures on the way out."""
        files, obj = file.files, file.object
        on_chunk = file.pacer.guard("while reading the object")
        try:
            with self.objects.spool(obj, on_chunk) as (content, checksum):
                file.content = content
                return checksum, processor(file)
        except (ObjectUnavailable, Skip) as skip:
            files.record_skip(obj, file.owner, str(skip), file.context.clock())
            raise Skip(str(skip)) from None
        except LeaseLost:
            raise
        except BudgetExhausted as exc:
            _stopped(files, file, exc)
        except Permanent as exc:
            progress = file.timed(file.committed)
            now = file.context.clock()
            files.finish(obj, file.owner, FileStatus.FAILED, progress, now, error=str(exc))
            raise
        except Exception as exc:
            _note(files, file, f"{type(exc).__name__}: {exc}")
            raise


def _finish(file: FileInput, result: FileResult, checksum: str) -> None:
    """Record the outcome, retried through a database blip (``durably``): the rows are in."""
    files, obj = file.files, file.object

    def write() -> bool:
        files.finish(
            obj, file.owner, result.status, result.progress, file.context.clock(),
            checksum=checksum or None, result=dict(result.details), error=result.error,
            after=file.committed,
        )  # fmt: skip
        return True

    def settled() -> bool:  # an earlier try committed, only its answer was lost
        row = files.get(obj.bucket, obj.name, obj.generation)
        return row is not None and row.status is result.status

    durably(file.context, write, f"recording the outcome of {obj.url}", settled)


def _stopped(files: ProcessedFiles, file: FileInput, exc: BudgetExhausted) -> NoReturn:
    """The budget ran out. If this attempt committed progress, a continuation carries it on
    (``HandedOn``: acknowledged) when a topic is set, else the redelivery does without spending
    an attempt (``Incomplete``), so a long file is never dead for being long; if it advanced
    nothing, it spends one, so a file that can never progress ends dead."""
    before, after = file.resumed, file.committed
    advanced = (after.resume_line, after.resume_offset) > (before.resume_line, before.resume_offset)
    if advanced and (key := hand_on(file.context, file.event, file.object)):
        raise HandedOn(key) from None
    _note(files, file, str(exc))
    if advanced:
        raise Incomplete(str(exc)) from exc
    raise exc


def _note(files: ProcessedFiles, file: FileInput, error: str) -> None:
    """Best effort: the failure may be the database itself."""
    try:
        files.note_error(file.object, file.owner, error, file.context.clock())
    except Exception:
        log.warning("could not record the failure of %s", file.object.url, exc_info=True)


def _named(event: StorageEvent) -> StoredObject:
    """The object as the event names it (before, or instead of, asking GCS)."""
    return StoredObject(
        event.bucket, event.name, int(event.generation), event.size, event.content_type
    )


def register(registry: Registry) -> None:
    registry.processors.add("import-jobs", importer(registry.job_kinds))
    registry.storage(StorageHandler(processors=registry.processors))
