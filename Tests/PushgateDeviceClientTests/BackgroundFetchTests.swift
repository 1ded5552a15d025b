import PushgateDeviceClient
import PushgateModel
import Testing

/// What a device makes of a silent push for its app's fetch: which notifications open a window,
/// when it ends, what the command is told, and what its end reports.
@Suite("Background fetch on the device")
struct BackgroundFetchTests {
    static let silent =
        #"{"seq":12,"apnsId":"6f1c-1","token":"ab","topic":"com.example.app","pushType":"background","priority":5,"#
        + #""collapseId":null,"payload":{"aps":{"content-available":1}},"acceptedAt":1,"delivery":"budget","carrier":null,"fetchWindowSeconds":7}"#

    @Test("a background push is silent: its seq, topic, apns-id, window and JSON as received")
    func silentNotification() throws {
        let notification = try #require(SilentNotification(json: Self.silent))
        #expect(notification.seq == 12)
        #expect(notification.topic == "com.example.app")
        #expect(notification.apnsID == "6f1c-1")
        #expect(notification.fetchWindowSeconds == 7)
        #expect(notification.json == Self.silent)
        #expect(
            notification.commandEnvironment == [
                "PUSHGATE_TOPIC": "com.example.app", "PUSHGATE_SEQ": "12", "PUSHGATE_APNS_ID": "6f1c-1",
            ]
        )
    }

    @Test("without fetchWindowSeconds the window is 30 seconds")
    func defaultWindow() throws {
        let json = #"{"seq":1,"apnsId":"a","topic":"t","pushType":"background"}"#
        #expect(try #require(SilentNotification(json: json)).fetchWindowSeconds == 30)
    }

    @Test(
        "other push types, and what is not a notification, open no window",
        arguments: [
            #"{"seq":1,"apnsId":"a","topic":"t","pushType":"alert","fetchWindowSeconds":30}"#,
            #"{"seq":1,"apnsId":"a","topic":"t","pushType":"voip"}"#,
            #"{"seq":1,"apnsId":"a","topic":"t"}"#,
            #"{"seq":1}"#,
            #"{"seq":-1,"apnsId":"a","topic":"t","pushType":"background"}"#,
            #"{"seq":"1","apnsId":"a","topic":"t","pushType":"background"}"#,
            "not json",
        ]
    )
    func notSilent(json: String) {
        #expect(SilentNotification(json: json) == nil)
    }

    @Test(
        "the deadline is the window from the arrival less a second (at most half the window); a window below 0 is over at once, one past 600 s ends at 600"
    )
    func deadline() throws {
        let arrival = ContinuousClock.now
        let notification = try #require(SilentNotification(json: Self.silent))
        #expect(notification.deadline(receivedAt: arrival) == arrival + .seconds(6))
        var short = notification
        short.fetchWindowSeconds = 1
        #expect(short.deadline(receivedAt: arrival) == arrival + .milliseconds(500))
        var negative = notification
        negative.fetchWindowSeconds = -5
        #expect(negative.deadline(receivedAt: arrival) == arrival)
        // No gateway opens more than 600 s; a server that says more is taken at 600.
        var endless = notification
        endless.fetchWindowSeconds = .max
        #expect(endless.deadline(receivedAt: arrival) == arrival + .seconds(599))
    }

    @Test(
        "exit 0 is newData, 1 noData, any other end failed; a timeout is not reported",
        arguments: [
            (FetchCommandOutcome.exited(status: 0), FetchResult?.some(.newData)),
            (.exited(status: 1), .noData),
            (.exited(status: 2), .failed),
            (.exited(status: 3), .failed),
            (.exited(status: 255), .failed),
            (.signalled(9), .failed),
            (.signalled(15), .failed),
            (.failedToRun("cannot start /bin/sh"), .failed),
            (.killedAtDeadline, nil),
            (.expiredBeforeItsTurn, nil),
        ]
    )
    func results(outcome: FetchCommandOutcome, result: FetchResult?) {
        #expect(outcome.result == result)
    }

    @Test(
        "--fetch-interval TOPIC=minimum|never|SECONDS",
        arguments: [
            ("com.example.app=minimum", "com.example.app", FetchInterval.minimum),
            ("com.example.app=never", "com.example.app", .never),
            ("com.example.app=1", "com.example.app", .seconds(1)),
            ("com.example.app=900", "com.example.app", .seconds(900)),
            ("com.example.app=604800", "com.example.app", .seconds(604_800)),
            ("a=b=60", "a=b", .seconds(60)),
        ]
    )
    func intervals(argument: String, topic: String, interval: FetchInterval) throws {
        let parsed = try FetchIntervalSetting.parse(argument)
        #expect(parsed.topic == topic)
        #expect(parsed.interval == interval)
    }

    @Test(
        "a bad --fetch-interval is refused, naming the value",
        arguments: [
            ("com.example.app", "com.example.app"),
            ("=60", "=60"),
            ("t=", "\"\""),
            ("t=0", "\"0\""),
            ("t=604801", "\"604801\""),
            ("t=-5", "\"-5\""),
            ("t=+5", "\"+5\""),
            ("t=1.5", "\"1.5\""),
            ("t=99999999999", "\"99999999999\""),
            ("t=Minimum", "\"Minimum\""),
            ("t=٣", "\"٣\""),
        ]
    )
    func badIntervals(argument: String, named: String) {
        let error = #expect(throws: FetchIntervalSetting.Invalid.self) { try FetchIntervalSetting.parse(argument) }
        #expect(error?.description.contains(named) == true, "\(String(describing: error))")
    }
}
