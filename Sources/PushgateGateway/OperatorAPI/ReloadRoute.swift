import PushgateHTTP
import PushgateModel
import PushgateOperator
import PushgateTransport

/// `POST /v1/admin/reload`: what SIGHUP does, for operators who cannot send signals (a container
/// platform's API, a remote shell). Behind the admin access rule. 200 with what was reloaded
/// and what waits for a restart; `422 ConfigurationRefused` with the reason when the new files
/// cannot be used (the running configuration keeps serving).
enum ReloadRoute {
    static func register(on router: inout Router, reloader: ConfigurationReloader, console: AdminConsole) {
        router.add("POST", "/v1/admin/reload", protocols: .http1AndHTTP2, role: .operator) { request, responder in
            guard console.admits(request, responder) else { return }
            // Reading the files blocks, and the answer waits for every shard: off the
            // connection's event loop.
            Task.detached {
                switch await reloader.reload(trigger: "POST /v1/admin/reload") {
                case .success(let outcome):
                    let list = { (items: [String]) in "[" + items.map(JSONText.quote).joined(separator: ",") + "]" }
                    responder.respond(
                        .json("{\"reloaded\":\(list(outcome.reloaded)),\"needsRestart\":\(list(outcome.needsRestart))}")
                    )
                case .failure(let failure):
                    responder.respond(
                        .refusal(
                            Refusal(
                                .configurationRefused,
                                "\(failure.description); the running configuration keeps serving"
                            )
                        )
                    )
                }
            }
        }
    }
}
