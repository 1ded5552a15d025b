import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// What happens with time: the scheduler's deadlines, heartbeats, the expiry sweep, and a new
// scheduler policy.
extension DeviceShard {
    /// One timer per shard, for the scheduler's earliest deadline (budget refills, deferral
    /// limits, expiry of held pushes, fetch windows): never a timer per device.
    func armSchedulerTimer() {
        guard !schedulerStopped, let deadline = state.scheduler.nextDeadline else {
            schedulerTimer?.cancel()
            schedulerTimer = nil
            schedulerTimerAt = .max
            return
        }
        if schedulerTimer != nil, schedulerTimerAt <= deadline { return }
        schedulerTimer?.cancel()
        schedulerTimerAt = deadline
        let delay = max(0, deadline - clock.nowMillis())
        let shard = NIOLoopBound(self, eventLoop: eventLoop)
        schedulerTimer = eventLoop.scheduleTask(in: .milliseconds(delay)) {
            let shard = shard.value
            shard.schedulerTimer = nil
            shard.schedulerTimerAt = .max
            shard.advanceScheduler()
        }
    }

    /// The gateway is stopping: the scheduler's timer is cancelled and not armed again.
    func stopSchedulerTimer() {
        schedulerStopped = true
        schedulerTimer?.cancel()
        schedulerTimer = nil
        schedulerTimerAt = .max
    }

    /// Runs the scheduler's due work: budget releases, deferral limits, expiry of held pushes.
    func advanceScheduler() {
        var plan = ShardPlan()
        state.apply(state.scheduler.advance(now: clock.nowMillis()), into: &plan)
        carryOut(plan)
    }

    /// A reloaded policy, in force from now (`Scheduler.reconfigure` says what becomes of the
    /// buckets and held pushes); what it releases at once is queued and committed like any
    /// release, and the buckets it changed are saved in the same commit.
    func reconfigure(scheduler configuration: SchedulerConfiguration) throws(SchedulerConfigurationError) {
        let output = try state.scheduler.reconfigure(configuration, now: clock.nowMillis()) { [state] app in
            state.appTokens[app].flatMap { state.registrations[$0]?.topic }
        }
        var plan = ShardPlan()
        state.apply(output, into: &plan)
        carryOut(plan)
    }

    /// Drops expired notifications not yet delivered and forgets tokens past their retention.
    func sweepExpired() {
        carryOut(state.sweepExpired())
    }

    /// Heartbeats for silent streams, so proxies and agents see a live connection. Run every
    /// tick: a stream that would be silent for the whole interval by the next tick gets one now.
    /// Only the streams the wheel has due are looked at; a closed or replaced stream (a deleted
    /// device has none) drops out.
    func heartbeat() {
        let now = clock.nowMillis()
        let lead = configuration.heartbeatLeadMillis
        for entry in heartbeats.takeDue(nowMillis: now) {
            guard let stream = entry.device.stream, stream.generation == entry.generation else { continue }
            // A wall clock stepped back leaves writes in the future: count them as made now, so
            // that the step cannot silence the stream for its length.
            if stream.lastWriteMillis > now { stream.lastWriteMillis = now }
            let due = stream.lastWriteMillis + lead
            guard due <= now else {
                // Written to since it was scheduled: due later.
                heartbeats.schedule(entry, dueMillis: due)
                continue
            }
            // No sink yet (the response head is on its way): the next tick looks again.
            guard let sink = stream.sink else {
                heartbeats.schedule(entry, dueMillis: now + 1)
                continue
            }
            stream.lastWriteMillis = now
            sink.heartbeat()
            heartbeats.schedule(entry, dueMillis: now + lead)
        }
    }
}
