import Foundation

/// The operator dashboard that `GET /admin` serves: one self-contained page, its CSS and
/// JavaScript inline, no external asset and no build step, so that the binary carries it and it
/// works on a gateway with no internet access. It holds no data: a browser cannot add a header to
/// a navigation, so the page loads without the admin token, asks for it (only when the API
/// answers 401 or 403: a loopback gateway without a token needs none), keeps it in the tab's
/// sessionStorage and sends it as `authorization: bearer`. For the same reason it reads
/// `/v1/admin/events` with `fetch` and parses the event stream itself: `EventSource` cannot send
/// a header, and a token in the URL would end up in logs and history.
///
/// The markup is here; its style and script live beside it (`DashboardStyle`, `DashboardScript`)
/// and are put inline once, when the page is first served.
enum DashboardPage {
    static let html: String = markup.replacingOccurrences(of: "/*STYLE*/", with: DashboardStyle.css)
        .replacingOccurrences(of: "/*SCRIPT*/", with: DashboardScript.js)

    private static let markup = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; form-action 'none'; base-uri 'none'">
        <title>Pushgate · operator</title>
        <style>
        /*STYLE*/
        </style>
        </head>
        <body>
        <header>
        <h1>Pushgate <small>operator</small></h1>
        <span id="status" class="pill">connecting</span>
        <span id="uptime" class="muted"></span>
        <span class="spacer"></span>
        <span id="started" class="muted"></span>
        <button id="forget-token" type="button" hidden>forget token</button>
        </header>
        <main>
        <section id="auth" class="panel" hidden>
        <form id="token-form" autocomplete="off">
        <label for="token-input">Admin token</label>
        <div class="row"><input id="token-input" type="password" autocomplete="off" spellcheck="false" placeholder="the gateway's admin token"><button id="token-submit" class="primary" type="submit">Connect</button></div>
        <p id="auth-message" role="alert"></p>
        <p id="auth-detail" class="muted"></p>
        <p class="muted">Kept in this browser tab only (sessionStorage) and sent as the <code>authorization</code> header.</p>
        </form>
        </section>
        <div id="dash" hidden>
        <section class="cards">
        <div class="card"><div class="k">received/s<span id="peak-received"></span></div><div class="v" id="received-rate">–</div><canvas id="c-received" data-color="--acc"></canvas><div class="foot">total <span id="received-total">–</span></div></div>
        <div class="card"><div class="k">delivered/s<span id="peak-delivered"></span></div><div class="v" id="delivered-rate">–</div><canvas id="c-delivered" data-color="--good"></canvas><div class="foot">total <span id="delivered-total">–</span></div></div>
        <div class="card"><div class="k">held<span id="peak-held"></span></div><div class="v" id="held">–</div><canvas id="c-held" data-color="--warn"></canvas><div class="foot">by the scheduler</div></div>
        <div class="card"><div class="k">stored<span id="peak-stored"></span></div><div class="v" id="stored">–</div><canvas id="c-stored" data-color="--acc"></canvas><div class="foot">queued, not yet written</div></div>
        <div class="card"><div class="k">unacked<span id="peak-unacked"></span></div><div class="v" id="unacked">–</div><canvas id="c-unacked" data-color="--acc2"></canvas><div class="foot">written, awaiting ack</div></div>
        <div class="card"><div class="k">connected<span id="peak-connected"></span></div><div class="v" id="connected">–</div><canvas id="c-connected" data-color="--good"></canvas><div class="foot">of <span id="devices-count">–</span> devices</div></div>
        </section>
        <section class="panels">
        <div class="panel" id="p-totals"><h2>Totals</h2>
        <table><thead><tr><th></th><th class="n">since start</th><th class="n">durable</th></tr></thead><tbody id="totals"></tbody></table>
        <p class="muted" style="font-size:12px;margin:6px 0 0">durable: since the store was created; kept across restarts</p></div>
        <div class="panel" id="p-drops"><h2>Dropped by reason</h2><div id="drops" class="bars drops"></div>
        <h2 style="margin-top:12px">Silent budget exhausted</h2><div>app <b id="budget-app">–</b> · device <b id="budget-device">–</b></div>
        <h2 style="margin-top:12px">Delivered by kind</h2><div id="kinds" class="bars"></div></div>
        <div class="panel" id="p-events"><h2>Notable events <span class="muted">newest first, last 100, UTC</span></h2>
        <p id="notable-skipped" class="note" hidden></p><p id="events-empty" class="muted">none yet</p><ol id="events"></ol></div>
        <div class="panel" id="p-device"><h2>Device</h2>
        <form id="device-form" class="row" autocomplete="off"><div class="row" style="flex:1"><input id="device-search-input" type="search" spellcheck="false" placeholder="device id"><button id="device-search-submit" type="submit">Inspect</button></div></form>
        <div id="device-view" aria-live="polite"><p class="muted">Enter a device id, or click one in the events or the top held devices.</p></div></div>
        <div class="panel" id="p-topics"><h2>Topics <span id="stats-time" class="muted"></span></h2>
        <table><thead><tr><th>topic</th><th class="n" title="registrations">regs</th><th class="n">held</th><th class="n">stored</th><th class="n">unacked</th></tr></thead><tbody id="topics"></tbody></table>
        <p id="topics-truncated" class="note" hidden>Only the 100 topics with the most held are listed.</p></div>
        <div class="panel" id="p-held"><h2>Top held devices</h2>
        <table><thead><tr><th>device</th><th class="n">held</th><th>oldest held</th></tr></thead><tbody id="top-held"></tbody></table>
        <p id="held-truncated" class="note" hidden>More devices hold notifications than are listed.</p></div>
        <div class="panel" id="p-nodes" hidden><h2>Cluster nodes <span id="nodes-scope" class="muted"></span></h2>
        <table><thead><tr><th>node</th><th class="n">devices</th><th>started</th><th>lease until</th></tr></thead><tbody id="nodes"></tbody></table></div>
        </section>
        </div>
        </main>
        <script>
        /*SCRIPT*/
        </script>
        </body>
        </html>
        """#
}
