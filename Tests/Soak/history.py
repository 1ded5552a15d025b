"""What the crash-loop soak saw, and the rules it is judged by (PRODUCT.md sections 2 to 4,
docs/decisions.md and docs/scheduler.md). The driver (crash_loop.py) records; `Checker` judges.
Times are milliseconds of the wall clock, which the gateway on the same machine shares.

A push is judged by what its provider was told: answered 200 (durable: it must be delivered, or
be dropped by a rule), answered otherwise (never delivered), or no answer because the gateway was
killed (may go either way). A notification is acknowledged for sure once a `POST .../ack` got its
204, or an event stream opened with `Last-Event-ID` got its 200: from then on it must never come
again, not even after a restart. Anything delivered and not acknowledged for sure may come again
(the unacked window at a kill); nothing else may.
"""

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field

WAKE_LABELS = ("piggyback", "keepalive", "online")
BUDGET_LABELS = ("immediate", "budget")
MAX_EXPIRATION_MS = 30 * 24 * 3600 * 1000


@dataclass
class Push:
    apns_id: str
    cycle: int
    device: str
    token: str
    topic: str
    kind: str  # alert10 | alert5 | alert1 | silent
    collapse: str | None
    expiration: str  # none | future | zero | past
    expiration_seconds: int | None
    label: str
    pad: int
    sent: int
    answered: int | None = None
    status: int | None = None
    disposition: str | None = None
    reason: str | None = None
    error: str | None = None
    # Whether the request names its priority when it is the default one.
    say_priority: bool = True

    @property
    def silent(self):
        return self.kind == "silent"

    @property
    def outcome(self):
        if self.status == 200:
            return "ok"
        return "refused" if self.status is not None else "unknown"

    @property
    def push_type(self):
        return "background" if self.silent else "alert"

    @property
    def priority(self):
        return {"alert10": 10, "alert5": 5, "alert1": 1, "silent": 5}[self.kind]

    def latest_expiry(self, accepted_at=None):
        """When the gateway may drop it as expired, at the latest (None: not within a run).
        `accepted_at` (from a delivered event) makes it exact."""
        if self.expiration == "future":
            return self.expiration_seconds * 1000
        if self.expiration == "zero":
            # apns-expiration 0 gives a connected device 10 s from acceptance (docs/scheduler.md, Expiry).
            accepted = accepted_at if accepted_at is not None else self.answered
            return None if accepted is None else accepted + 10_000
        return None


@dataclass
class Channel:
    """An event stream or a keep-alive request: what a device receives notifications on."""
    id: int
    kind: str  # stream | keepalive
    device: str
    cycle: int
    requested: int
    head_at: int | None = None
    status: int | None = None
    last_event_id: int | None = None


@dataclass
class Receipt:
    apns_id: str
    device: str
    seq: int
    channel: int
    cycle: int
    received: int
    delivery: str
    accepted_at: int
    data: dict


@dataclass
class Ack:
    device: str
    up_to: int
    kind: str  # post | last-event-id
    cycle: int
    sent: int
    answered: int | None = None
    status: int | None = None
    channel: int | None = None

    @property
    def definite(self):
        return self.status == (204 if self.kind == "post" else 200)

    @property
    def possible(self):
        """Its deletions may be on disk: answered yes, or not answered at all."""
        return self.status is None or self.definite


@dataclass
class Unregistration:
    device: str
    token: str
    topic: str
    cycle: int
    sent: int
    answered: int | None = None
    status: int | None = None


@dataclass
class Registration:
    device: str
    topic: str
    cycle: int
    sent: int
    token: str | None = None
    answered: int | None = None
    status: int | None = None


@dataclass
class StateReport:
    device: str
    cycle: int
    sent: int
    power: str | None
    apps: dict
    answered: int | None = None
    status: int | None = None


@dataclass
class Reading:
    """The admin view of every device right after a restart, before any device connects."""
    cycle: int
    before: int
    after: int
    views: dict  # device id -> the /v1/admin/devices/{id} document


@dataclass
class History:
    pushes: dict = field(default_factory=dict)
    channels: dict = field(default_factory=dict)
    receipts: list = field(default_factory=list)
    acks: list = field(default_factory=list)
    unregistrations: list = field(default_factory=list)
    registrations: list = field(default_factory=list)
    states: list = field(default_factory=list)
    readings: list = field(default_factory=list)
    kills: list = field(default_factory=list)  # (cycle, at)
    final_views: dict = field(default_factory=dict)
    final_at: int = 0
    # Found while recording (transport errors while the gateway lived, unexpected statuses...).
    violations: list = field(default_factory=list)

    def violation(self, category, message):
        self.violations.append((category, message))


@dataclass
class Policy:
    """The scheduler settings the soak runs with: what the budget checks need."""
    app_burst: dict  # topic -> burst
    app_refill_per_hour: dict  # topic -> refill
    device_burst: int
    device_refill_per_hour: int
    max_held_per_app: int


class Checker:
    def __init__(self, history, policy):
        self.h = history
        self.policy = policy
        self.violations = list(history.violations)
        self.figures = Counter()
        self.receipts_of = defaultdict(list)
        for receipt in sorted(history.receipts, key=lambda r: r.received):
            self.receipts_of[receipt.apns_id].append(receipt)
        self.groups = defaultdict(list)
        for push in history.pushes.values():
            if push.collapse is not None:
                self.groups[(push.token, push.collapse)].append(push)
        self.unregistrations = defaultdict(list)
        for unregistration in history.unregistrations:
            self.unregistrations[unregistration.token].append(unregistration)
        self.terminations = defaultdict(list)
        for report in history.states:
            for topic, state in report.apps.items():
                if state == "terminated" and report.status in (None, 200):
                    self.terminations[(report.device, topic)].append(report)
        self.kill_at = dict(history.kills)
        self.pushes_of = defaultdict(list)
        for push in history.pushes.values():
            self.pushes_of[push.device].append(push)
        self.definite_acks = self.ack_index(lambda ack: ack.definite, lambda ack: ack.answered)
        self.possible_acks = self.ack_index(lambda ack: ack.possible, lambda ack: ack.sent)

    def ack_index(self, keep, when):
        """Per device: times (sorted) and the highest upTo acked by each time."""
        index = {}
        by_device = defaultdict(list)
        for ack in self.h.acks:
            if keep(ack):
                by_device[ack.device].append((when(ack), ack.up_to, ack))
        for device, acks in by_device.items():
            acks.sort(key=lambda item: item[0])
            times, highest, best, running = [], [], [], None
            for at, up_to, ack in acks:
                if running is None or up_to > running[0]:
                    running = (up_to, ack)
                times.append(at)
                highest.append(running[0])
                best.append(running[1])
            index[device] = (times, highest, best)
        return index

    @staticmethod
    def acked_by(index, device, seq, before):
        """The ack in `index` that covers `seq` and came before `before`, or None."""
        if device not in index:
            return None
        times, highest, best = index[device]
        position = bisect.bisect_left(times, before)
        if position == 0 or highest[position - 1] < seq:
            return None
        return best[position - 1]

    def fail(self, category, message):
        self.violations.append((category, message))

    def channel(self, receipt):
        return self.h.channels[receipt.channel]

    # MARK: Excuses: the rules under which a push answered 200 may leave undelivered.

    def excuse(self, push, at):
        """Why `push` may be gone by `at` without reaching its device, or None."""
        for other in self.groups.get((push.token, push.collapse), ()) if push.collapse else ():
            # A later push with the same collapse id replaced it (held, or stored and not yet
            # written): one that said `coalesced`, or whose answer was lost. Not one answered
            # before this one was even sent.
            if other is push or other.sent >= at:
                continue
            if not (other.disposition == "coalesced" or other.outcome == "unknown"):
                continue
            if other.answered is not None and other.answered < push.sent:
                continue
            return "coalesced"
        expiry = push.latest_expiry()
        if expiry is not None and expiry <= at:
            return "expired"
        if any(u.sent < at for u in self.unregistrations.get(push.token, ())):
            return "unregistered"
        if push.silent:
            for report in self.terminations.get((push.device, push.topic), ()):
                if report.sent < at and not (report.answered is not None and report.answered < push.sent):
                    return "app_terminated"
        return None

    # MARK: Provider answers

    def check_answers(self):
        for push in self.h.pushes.values():
            self.figures[f"pushes.{push.outcome}"] += 1
            if push.outcome == "ok":
                self.figures[f"disposition.{push.disposition}"] += 1
            elif push.outcome == "refused":
                self.figures[f"refused.{push.status}.{push.reason}"] += 1
            unregistrations = self.unregistrations.get(push.token, ())
            if push.status == 200:
                done = [u for u in unregistrations if u.status == 204 and u.answered < push.sent]
                if done:
                    self.fail("answer", f"{push.apns_id}: 200 for token {push.token[:12]}… unregistered (204) at {done[0].answered}, before the push was sent at {push.sent}")
                if push.expiration == "past" and push.disposition != "discarded":
                    self.fail("answer", f"{push.apns_id}: apns-expiration in the past answered {push.disposition}, not discarded")
                if push.disposition not in ("delivered", "held", "stored", "coalesced", "discarded"):
                    self.fail("answer", f"{push.apns_id}: 200 with pushgate-disposition {push.disposition!r}")
            elif push.status == 410:
                if push.reason != "Unregistered" or not any(u.sent < push.answered for u in unregistrations):
                    self.fail("answer", f"{push.apns_id}: 410 {push.reason} for token {push.token[:12]}… that no unregistration was sent for before the answer")
            elif push.status is not None:
                self.fail("answer", f"{push.apns_id}: unexpected {push.status} {push.reason} ({push.kind}, cycle {push.cycle})")

    # MARK: What devices received

    def check_receipts(self):
        seen_channels = defaultdict(list)
        for receipt in self.h.receipts:  # in the order they were read
            seen_channels[receipt.channel].append(receipt)
        for channel_id, receipts in seen_channels.items():
            seqs = [r.seq for r in receipts]
            if any(b <= a for a, b in zip(seqs, seqs[1:])):
                self.fail("order", f"channel {channel_id}: seqs not strictly increasing: {seqs[:20]}")
            resumed = self.h.channels[channel_id].last_event_id
            if resumed is not None and seqs[0] <= resumed:
                self.fail("acked_redelivered", f"stream {channel_id} opened with Last-Event-ID {resumed} delivered seq {seqs[0]}")

        delivered_unknown = 0
        for apns_id, receipts in self.receipts_of.items():
            push = self.h.pushes.get(apns_id)
            first = receipts[0]
            if push is None:
                self.fail("stranger", f"{apns_id} delivered (seq {first.seq}) but never sent")
                continue
            if push.outcome == "refused":
                self.fail("delivered_refused", f"{apns_id}: answered {push.status} {push.reason}, delivered anyway (seq {first.seq}, {first.delivery})")
            if push.outcome == "ok" and push.disposition == "discarded":
                self.fail("delivered_discarded", f"{apns_id}: answered 200 discarded, delivered anyway (seq {first.seq}, {first.delivery})")
            if push.outcome == "unknown":
                delivered_unknown += 1
            self.figures[f"delivered.as.{first.delivery}"] += 1
            if push.device != first.device:
                self.fail("content", f"{apns_id}: pushed to device {push.device}, received by {first.device}")
            self.check_content(push, receipts)
            for receipt in receipts:
                self.check_expiry(push, receipt)
            if first.delivery == "immediate" and push.outcome == "ok" and push.disposition != "delivered":
                self.fail("content", f"{apns_id}: delivered as immediate but answered {push.disposition}")
            self.check_repeats(push, receipts)
        self.figures["delivered.unique"] = len(self.receipts_of)
        self.figures["delivered.receipts"] = len(self.h.receipts)
        self.figures["delivered.unansweredPushes"] = delivered_unknown

    def check_content(self, push, receipts):
        for receipt in receipts:
            data = receipt.data
            payload = data.get("payload") or {}
            expected = (push.token, push.topic, push.push_type, push.priority, push.collapse, push.label, push.pad)
            got = (data.get("token"), data.get("topic"), data.get("pushType"), data.get("priority"), data.get("collapseId"),
                   payload.get("soak"), len(payload.get("pad", "")))
            if got != expected:
                self.fail("content", f"{push.apns_id}: received {got}, sent {expected}")
                return
            # Acceptance is stamped between the request and its answer (one clock; ms rounding).
            latest = push.answered if push.answered is not None else self.kill_at.get(push.cycle, receipt.received)
            if not (push.sent - 2 <= receipt.accepted_at <= latest + 2):
                self.fail("content", f"{push.apns_id}: acceptedAt {receipt.accepted_at} outside its request {push.sent}..{latest}")
        if len({r.seq for r in receipts}) > 1:
            self.fail("seq_changed", f"{push.apns_id}: delivered with seqs {[r.seq for r in receipts]}")

    def check_expiry(self, push, receipt):
        expiry = push.latest_expiry(receipt.accepted_at)
        if expiry is None:
            return
        expiry = min(expiry, receipt.accepted_at + MAX_EXPIRATION_MS)
        requested = self.channel(receipt).requested
        if requested >= expiry:
            self.fail("delivered_expired", f"{push.apns_id}: expired at {expiry}, delivered on {self.channel(receipt).kind} {receipt.channel} requested at {requested}")
        elif receipt.received >= expiry:
            # Written before its expiry (on a stream asked for before it) and read after it:
            # the write's own time is not observable, only bounded.
            self.figures["delivered.readAfterExpiry"] += 1

    def check_repeats(self, push, receipts):
        keepalives = [self.channel(r) for r in receipts if self.channel(r).kind == "keepalive"]
        if len(keepalives) > 1:
            self.fail("duplicate_keepalive", f"{push.apns_id}: released by keep-alives {[k.id for k in keepalives]}: a keep-alive releases only what is held")
        for keepalive in keepalives[:1]:
            # Its release is skipped by the stream open then; a stream opened later sends it
            # again while it is unacknowledged.
            for receipt in receipts:
                stream = self.channel(receipt)
                if stream.kind == "stream" and stream.cycle == keepalive.cycle and stream.head_at is not None and stream.head_at < keepalive.requested:
                    self.fail("duplicate_keepalive", f"{push.apns_id}: in keep-alive {keepalive.id}'s response and on stream {stream.id}, open since before that keep-alive")
        first = receipts[0]
        for index, later in enumerate(receipts[1:], start=1):
            later_channel = self.channel(later)
            if later.channel in {r.channel for r in receipts[:index]}:
                self.fail("duplicate_on_channel", f"{push.apns_id}: seq {later.seq} twice on {later_channel.kind} {later.channel}")
                continue
            ack = self.acked_by(self.definite_acks, push.device, first.seq, later_channel.requested)
            if ack is not None:
                self.fail(
                    "acked_redelivered",
                    f"{push.apns_id}: seq {first.seq} acked ({ack.kind} upTo {ack.up_to}, answered {ack.status} at {ack.answered}, cycle {ack.cycle} killed at {self.kill_at.get(ack.cycle)}), "
                    f"delivered again in cycle {later.cycle} on {later_channel.kind} {later.channel} requested at {later_channel.requested}",
                )
                continue
            if later.cycle > first.cycle:
                self.figures["redelivered.afterKill"] += 1
            else:
                self.figures["redelivered.onReconnect"] += 1

    # MARK: The store after each restart

    def check_reading(self, reading, previous):
        """Right after restart `reading.cycle`: what the store kept, device by device."""
        at = reading.before
        released_before = set()
        for receipt in self.h.receipts:
            if receipt.cycle < reading.cycle:
                released_before.add(receipt.apns_id)
        for device, view in reading.views.items():
            self.check_registrations(device, view, reading)
            listed = {}
            for entry in view.get("notifications", []):
                listed[entry["apnsId"]] = entry
                self.check_listed(device, entry, at, released_before, previous)
            held_per_topic = Counter(e["topic"] for e in view.get("notifications", []) if e["state"] == "held" and e["pushType"] == "background")
            if held_per_topic and max(held_per_topic.values()) >= self.policy.max_held_per_app:
                self.fail("config", f"device {device}: {max(held_per_topic.values())} silent pushes held for one app: the maxHeldPerApp drop could apply, which the soak does not model")
            for push in self.pushes_of[device]:
                if push.outcome != "ok" or push.disposition == "discarded" or push.cycle > reading.cycle:
                    continue
                if push.apns_id in listed:
                    continue
                receipts = [r for r in self.receipts_of.get(push.apns_id, ()) if r.cycle <= reading.cycle]
                if receipts and self.acked_by(self.possible_acks, device, receipts[0].seq, at) is not None:
                    continue
                if self.excuse(push, reading.after) is not None:
                    continue
                state = f"delivered (seq {receipts[0].seq}) and not acknowledged" if receipts else "never delivered"
                self.fail("restart_lost", f"after restart {reading.cycle}: {push.apns_id} ({push.kind}, answered 200 {push.disposition} in cycle {push.cycle}) {state}, and not in the store")

    def check_registrations(self, device, view, reading):
        """Registrations answered 201 are there unless an unregistration was sent; none that
        was unregistered for sure (204) is."""
        active = {r["token"] for r in view.get("registrations", [])}
        for registration in self.h.registrations:
            if registration.device != device or registration.status != 201 or registration.sent >= reading.before:
                continue
            gone = [u for u in self.unregistrations.get(registration.token, ()) if u.sent < reading.before]
            if not gone and registration.token not in active:
                self.fail("restart_lost_registration", f"after restart {reading.cycle}: registration {registration.token[:12]}… ({registration.topic}, answered 201 in cycle {registration.cycle}) is gone")
            if any(u.status == 204 for u in gone) and registration.token in active:
                self.fail("restart_unregistration_lost", f"after restart {reading.cycle}: {registration.token[:12]}… unregistered (204), active again")

    def check_listed(self, device, entry, at, released_before, previous):
        apns_id = entry["apnsId"]
        push = self.h.pushes.get(apns_id)
        seq = entry.get("seq")
        if push is None:
            self.fail("restart_stranger", f"device {device} holds {apns_id}, never sent")
            return
        if push.outcome == "refused":
            self.fail("restart_refused", f"{apns_id} answered {push.status} {push.reason}, yet stored ({entry['state']})")
        if push.disposition == "discarded":
            self.fail("restart_discarded", f"{apns_id} answered discarded, yet stored ({entry['state']})")
        if seq is not None:
            ack = self.acked_by(self.definite_acks, device, seq, at)
            if ack is not None:
                self.fail("restart_acked", f"{apns_id} seq {seq} acked ({ack.kind} upTo {ack.up_to}, answered at {ack.answered}, cycle {ack.cycle} killed at {self.kill_at.get(ack.cycle)}), still stored after the restart")
            received = self.receipts_of.get(apns_id)
            if received and received[0].seq != seq:
                self.fail("seq_changed", f"{apns_id} delivered as seq {received[0].seq}, stored as seq {seq}")
        elif entry["state"] == "held":
            if apns_id in released_before:
                self.fail("restart_held_again", f"{apns_id} was delivered, and is held again after the restart")
            elif previous is not None:
                before = next((e for e in previous.views.get(device, {}).get("notifications", []) if e["apnsId"] == apns_id), None)
                if before is not None and before.get("seq") is not None:
                    self.fail("restart_held_again", f"{apns_id} had seq {before['seq']} after the previous restart, held again now")

    # MARK: Budgets

    def check_budgets(self, reading, previous):
        """Silent budgets after restart `reading.cycle`, against the previous restart's: they
        may have lost what this cycle's silent deliveries took (a 200 `delivered`, or an event
        labelled immediate or budget, for sure; a release whose label was not seen, maybe), and
        regained at most what the refill gives over the time between."""
        cycle = reading.cycle
        first_receipts = {apns_id: receipts[0] for apns_id, receipts in self.receipts_of.items()}
        previous_seqs = {}
        for view in previous.views.values():
            for entry in view.get("notifications", []):
                previous_seqs[entry["apnsId"]] = entry.get("seq")
        listed = {}
        for view in reading.views.values():
            for entry in view.get("notifications", []):
                listed[entry["apnsId"]] = entry
        sure = defaultdict(set)
        maybe = defaultdict(set)
        for push in self.h.pushes.values():
            if not push.silent or push.cycle > cycle or push.outcome == "refused" or push.disposition == "discarded":
                continue
            first = first_receipts.get(push.apns_id)
            if first is not None and first.cycle < cycle:
                continue
            if previous_seqs.get(push.apns_id) is not None:
                continue  # released before this cycle
            took = (push.cycle == cycle and push.disposition == "delivered") or (
                first is not None and first.cycle == cycle and first.delivery in BUDGET_LABELS)
            if took:
                sure[push.token].add(push.apns_id)
                continue
            if first is not None and first.cycle == cycle:
                continue  # a wake released it: no budget
            entry = listed.get(push.apns_id)
            if entry is not None:
                if entry.get("seq") is not None:
                    maybe[push.token].add(push.apns_id)  # released this cycle, label unseen
                continue
            if push.expiration in ("future", "zero") or self.unregistrations.get(push.token):
                maybe[push.token].add(push.apns_id)  # released, then expired or unregistered unseen
        elapsed_hours = lambda since: max(0, reading.after - since) / 3_600_000
        previous_buckets = {}
        for device, view in previous.views.items():
            previous_buckets[("device", device)] = view["bucket"]["tokens"]
            for registration in view.get("registrations", []):
                previous_buckets[("app", registration["token"])] = registration["bucket"]["tokens"]
        registered_at = {r.token: r.sent for r in self.h.registrations if r.token}
        token_device = {push.token: push.device for push in self.h.pushes.values()}
        for device, view in reading.views.items():
            tokens = {token for token, owner in token_device.items() if owner == device}
            took = set().union(*(sure[t] for t in tokens)) if tokens else set()
            might = set().union(*(maybe[t] for t in tokens)) if tokens else set()
            before = previous_buckets.get(("device", device), self.policy.device_burst)
            self.check_bucket(f"device {device}", view["bucket"], before, elapsed_hours(previous.before) * self.policy.device_refill_per_hour, len(took), len(might), cycle)
            for registration in view.get("registrations", []):
                token = registration["token"]
                topic = registration["topic"]
                since = previous.before if ("app", token) in previous_buckets else registered_at.get(token, previous.before)
                before = previous_buckets.get(("app", token), self.policy.app_burst[topic])
                refill = elapsed_hours(since) * self.policy.app_refill_per_hour[topic]
                self.check_bucket(f"app {topic} token {token[:12]}…", registration["bucket"], before, refill, len(sure[token]), len(maybe[token]), cycle)
                self.figures["budget.checks"] += 1

    def check_bucket(self, what, bucket, before, refill, took, might, cycle):
        # The admin view floors tokens to hundredths: each reading is up to 0.01 low.
        tokens = bucket["tokens"]
        highest = min(bucket["capacity"], before + 0.01 + refill - took)
        lowest = before - took - might - 0.01
        if tokens > highest + 1e-6:
            self.fail("budget", f"after restart {cycle}: {what} has {tokens} tokens; at most {highest:.4f} (had {before}, +{refill:.4f} refill, {took} taken for sure)")
        if tokens < max(0, lowest) - 1e-6:
            self.fail("budget", f"after restart {cycle}: {what} has {tokens} tokens; at least {lowest:.4f} (had {before}, {took} taken for sure, {might} maybe)")

    # MARK: The end

    def check_final(self):
        at = self.h.final_at
        excused = Counter()
        for push in self.h.pushes.values():
            if push.outcome != "ok" or push.disposition == "discarded":
                continue
            if push.apns_id in self.receipts_of:
                continue
            reason = self.excuse(push, at)
            if reason is None:
                self.fail("lost", f"{push.apns_id} ({push.kind}, cycle {push.cycle}, answered 200 {push.disposition}, expiration {push.expiration}, collapse {push.collapse}) never delivered")
            else:
                excused[reason] += 1
        for reason, count in excused.items():
            self.figures[f"undelivered.{reason}"] = count
        self.figures["undelivered.unanswered"] = sum(
            1 for push in self.h.pushes.values() if push.outcome == "unknown" and push.apns_id not in self.receipts_of)
        for device, view in self.h.final_views.items():
            left = view.get("notifications", [])
            if left:
                self.fail("final_leftover", f"device {device} still has {len(left)} after the final drain: {[(e['apnsId'], e['state'], e['reason']) for e in left[:5]]}")

    def run(self):
        self.check_answers()
        self.check_receipts()
        previous = None
        for reading in self.h.readings:
            if previous is not None:
                self.check_reading(reading, previous)
                self.check_budgets(reading, previous)
            previous = reading
        self.check_final()
        self.figures["acks.definite.post"] = sum(1 for a in self.h.acks if a.kind == "post" and a.definite)
        self.figures["acks.definite.lastEventId"] = sum(1 for a in self.h.acks if a.kind == "last-event-id" and a.definite)
        self.figures["acks.unanswered"] = sum(1 for a in self.h.acks if a.status is None)
        return self.violations, self.figures
