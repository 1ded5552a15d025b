/// The operator dashboard that `GET /admin` serves: one self-contained page, its CSS and
/// JavaScript inline, no external asset and no build step, so that the binary carries it and it
/// works on a gateway with no internet access. It holds no data: a browser cannot add a header to
/// a navigation, so the page loads without the admin token, asks for it (only when the API
/// answers 401 or 403: a loopback gateway without a token needs none), keeps it in the tab's
/// sessionStorage and sends it as `authorization: bearer`. For the same reason it reads
/// `/v1/admin/events` with `fetch` and parses the event stream itself: `EventSource` cannot send
/// a header, and a token in the URL would end up in logs and history.
///
/// Over 450 lines on purpose: the file is the page as the browser gets it (markup, style and
/// script), and splitting it into Swift strings to concatenate would only hide that.
enum DashboardPage {
    static let html: String = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; form-action 'none'; base-uri 'none'">
        <title>Pushgate · operator</title>
        <style>
        :root{color-scheme:light dark;--bg:#f4f5f7;--fg:#1b1f24;--muted:#5b6573;--card:#fff;--line:#dfe3e8;--chip:#eef1f4;--acc:#2563eb;--acc2:#0f766e;--warn:#b45309;--bad:#c0262d;--good:#15803d}
        @media (prefers-color-scheme:dark){:root{--bg:#0e1115;--fg:#e3e7ec;--muted:#97a1ae;--card:#161a20;--line:#29303a;--chip:#212731;--acc:#6ea8fe;--acc2:#2dd4bf;--warn:#f0b43c;--bad:#f47174;--good:#4ade80}}
        *{box-sizing:border-box}
        [hidden]{display:none!important}
        body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
        header{display:flex;flex-wrap:wrap;align-items:center;gap:6px 14px;padding:10px 16px;background:var(--card);border-bottom:1px solid var(--line)}
        h1{font-size:17px;margin:0}
        h1 small{font-weight:400;color:var(--muted)}
        h2{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);margin:0 0 8px;display:flex;justify-content:space-between;gap:8px;align-items:baseline}
        h2 .muted{text-transform:none;letter-spacing:0;font-weight:400}
        h3{font-size:13px;margin:12px 0 6px}
        .spacer{flex:1}
        .muted{color:var(--muted)}
        .error{color:var(--bad)}
        .note{font-size:12px;color:var(--warn);margin:6px 0 0}
        code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere}
        .pill{padding:2px 10px;border-radius:999px;font-weight:600;font-size:12px;background:var(--chip);color:var(--muted);white-space:nowrap}
        .pill.live{color:var(--good);background:color-mix(in srgb,var(--good) 16%,transparent)}
        .pill.bad{color:var(--warn);background:color-mix(in srgb,var(--warn) 16%,transparent)}
        button{font:inherit;color:inherit;background:var(--chip);border:1px solid var(--line);border-radius:6px;padding:4px 10px;cursor:pointer}
        button.primary{background:var(--acc);border-color:var(--acc);color:#fff}
        button.link{background:none;border:0;padding:0;color:var(--acc);text-align:left;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere}
        button.link:hover{text-decoration:underline}
        input{font:inherit;color:inherit;background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:5px 8px;min-width:0;flex:1}
        form .row{display:flex;gap:8px}
        main{padding:12px 16px;max-width:1600px;margin:0 auto}
        #dash{display:grid;gap:12px}
        .card,.panel{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 12px;min-width:0}
        .cards{display:grid;gap:12px;grid-template-columns:repeat(2,minmax(0,1fr))}
        @media (min-width:600px){.cards{grid-template-columns:repeat(3,minmax(0,1fr))}}
        @media (min-width:1100px){.cards{grid-template-columns:repeat(6,minmax(0,1fr))}}
        .card .k{display:flex;justify-content:space-between;gap:4px;color:var(--muted);font-size:12px}
        .card .v{font-size:26px;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.2}
        .card canvas{display:block;width:100%;height:44px;margin:4px 0 2px}
        .card .foot{font-size:12px;color:var(--muted);font-variant-numeric:tabular-nums}
        .panels{display:grid;gap:12px;grid-template-columns:minmax(0,1fr);align-items:start}
        @media (min-width:760px){.panels{grid-template-columns:repeat(2,minmax(0,1fr));grid-template-areas:"totals drops" "device device" "events held" "topics topics"}}
        @media (min-width:1200px){.panels{grid-template-columns:repeat(3,minmax(0,1fr));grid-template-areas:"totals drops events" "device device events" "topics topics held"}}
        @media (min-width:760px){#p-totals{grid-area:totals}#p-drops{grid-area:drops}#p-events{grid-area:events}#p-device{grid-area:device}#p-topics{grid-area:topics}#p-held{grid-area:held}}
        table{width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums}
        th,td{text-align:left;padding:4px 6px;border-bottom:1px solid var(--line);vertical-align:top;overflow-wrap:anywhere}
        th{font-weight:600;color:var(--muted);font-size:12px}
        .n{text-align:right;white-space:nowrap}
        .bars{display:grid;grid-template-columns:auto auto minmax(40px,1fr);gap:3px 8px;align-items:center;font-size:13px}
        .bars .bar{height:8px;border-radius:4px;background:var(--acc);min-width:2px}
        .bars.drops .bar{background:var(--bad)}
        .chip{display:inline-block;padding:0 6px;border-radius:4px;background:var(--chip);font-size:12px;white-space:nowrap}
        .kind{font-size:11px;font-weight:700;text-transform:uppercase;letter-spacing:.03em}
        .k-held,.s-held{color:var(--warn)}
        .k-released,.s-unacked{color:var(--good)}
        .k-dropped{color:var(--bad)}
        .s-stored{color:var(--acc)}
        #events{list-style:none;margin:0;padding:0;max-height:720px;overflow:auto}
        #events li{display:grid;grid-template-columns:auto 5.5em minmax(0,1fr);gap:0 8px;padding:5px 0;border-bottom:1px solid var(--line);font-size:13px}
        #events .meta{grid-column:3;font-size:12px;color:var(--muted);overflow-wrap:anywhere}
        @media (max-width:599px){#events li>:nth-child(n+3){grid-column:1/-1}}
        .dev-head{display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center;margin-top:10px}
        .dev-head code{font-size:14px;font-weight:600}
        .meter{display:inline-block;vertical-align:middle;width:48px;height:6px;border-radius:3px;background:var(--chip);margin-right:6px;overflow:hidden}
        .meter i{display:block;height:100%;background:var(--good)}
        .empty .meter i{background:var(--bad)}
        .notes{list-style:none;padding:0;margin:0;display:grid;gap:8px}
        .notes li{border:1px solid var(--line);border-left:4px solid var(--warn);border-radius:6px;padding:6px 10px}
        .notes li.st-stored{border-left-color:var(--acc)}
        .notes li.st-unacked{border-left-color:var(--good)}
        .regs>div{padding:5px 0;border-bottom:1px solid var(--line)}
        .regs .meta{color:var(--fg);font-size:13px;align-items:center}
        .topic{font-weight:600;font-size:13px}
        .reason{font-weight:600;font-size:15px;margin-bottom:2px}
        .meta{font-size:12px;color:var(--muted);display:flex;flex-wrap:wrap;gap:2px 10px}
        #auth{max-width:520px;margin:40px auto}
        #auth label{display:block;font-weight:600;margin-bottom:6px}
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
        </section>
        </div>
        </main>
        <script>
        "use strict";
        const $ = id => document.getElementById(id);
        // The API sits beside the page: /admin -> /v1/admin/..., also under a reverse proxy's prefix.
        const BASE = location.pathname.replace(/\/admin\/?$/, "");
        const KEY = "pushgate.adminToken", WINDOW = 300000, CAP = 100, SHOWN = 200;
        const TOTALS = ["received", "delivered", "dropped", "rejected", "discarded", "acknowledged"];
        const SERIES = ["received", "delivered", "held", "stored", "unacked", "connected"];
        const nf = new Intl.NumberFormat("en-US");
        // sessionStorage: the token lasts as long as the tab; storage may be disabled, then it lasts as long as the page.
        const session = v => { try { if (v === undefined) return sessionStorage.getItem(KEY); if (v === null) sessionStorage.removeItem(KEY); else sessionStorage.setItem(KEY, v); } catch (_) { return null; } };
        let token = session();
        let gen = 0, attempt = 0, ctl = null, retryTimer = 0, statsTimer = 0, deviceReq = 0;
        // durableBase: the durable totals less this process's, from the last stats; the ticks'
        // totals are added to it, so the durable column moves live too.
        let lastTick = null, startedAt = null, skipped = 0, durableBase = null;
        const series = {};

        function el(tag, props, ...kids) {
          const e = document.createElement(tag);
          for (const [k, v] of Object.entries(props || {})) {
            if (k === "class") e.className = v;
            else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
            else e.setAttribute(k, v);
          }
          for (const k of kids) if (k != null && k !== false) e.append(k instanceof Node ? k : String(k));
          return e;
        }
        const int = n => Number.isFinite(n) ? String(Math.trunc(n)) : "–";
        const fmt = n => Number.isFinite(n) ? nf.format(n) : "–";
        const rate = r => r >= 10 ? nf.format(Math.round(r)) : (Math.round(r * 10) / 10).toString();
        const iso = ms => Number.isFinite(ms) ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "–";
        const hms = ms => Number.isFinite(ms) ? new Date(ms).toISOString().slice(11, 19) : "–";
        const now = () => lastTick ? lastTick.time : Date.now();
        function age(ms) {
          const s = Math.max(0, Math.round(ms / 1000)), m = Math.floor(s / 60), h = Math.floor(m / 60);
          return s < 60 ? s + "s" : m < 60 ? m + "m " + (s % 60) + "s" : h < 48 ? h + "h " + (m % 60) + "m" : Math.floor(h / 24) + "d " + (h % 24) + "h";
        }
        function setText(id, v) { const e = $(id); if (e) e.textContent = v; }
        function setStatus(text, cls, why) { const s = $("status"); s.textContent = text; s.className = "pill " + (cls || ""); s.title = why || ""; }

        class HTTPError extends Error {
          constructor(status, body) { super((body && body.detail) || "HTTP " + status); this.status = status; this.body = body || {}; }
        }
        async function errorOf(res) { let b = null; try { b = await res.json(); } catch (_) {} return new HTTPError(res.status, b); }
        const isAuth = e => e instanceof HTTPError && (e.status === 401 || e.status === 403);
        function headers() { return token ? { authorization: "Bearer " + token } : {}; }
        async function api(path) {
          const res = await fetch(BASE + path, { headers: headers(), cache: "no-store" });
          if (!res.ok) throw await errorOf(res);
          return res.json();
        }

        // ---- session: try without a token (a loopback gateway with none answers), ask on 401/403
        function stop() {
          gen++; clearInterval(statsTimer); clearTimeout(retryTimer);
          if (ctl) ctl.abort();
          ctl = null;
        }
        async function start() {
          stop();
          const g = gen;
          setStatus("connecting");
          let stats;
          try { stats = await api("/v1/admin/stats"); }
          catch (e) {
            if (g !== gen) return;
            if (isAuth(e)) return showAuth(e);
            const d = backoff();
            setStatus("unreachable, retrying in " + Math.round(d) + " s", "bad", e.message);
            retryTimer = setTimeout(() => { if (g === gen) start(); }, d * 1000);
            return;
          }
          if (g !== gen) return;
          $("auth").hidden = true; $("dash").hidden = false; $("forget-token").hidden = !token;
          onStats(stats);
          statsTimer = setInterval(refreshStats, 10000);
          connect(g);
        }
        function showAuth(e) {
          stop();
          const wrong = e.status === 401 && token;
          if (wrong) { session(null); token = null; }
          setStatus(e.status === 403 ? "forbidden" : "token needed", "bad");
          $("dash").hidden = true; $("auth").hidden = false; $("forget-token").hidden = true;
          const m = $("auth-message");
          m.className = e.status === 401 && !wrong ? "" : "error";
          m.textContent = wrong ? "The gateway refused that token (401 Unauthorized). Check it and try again."
            : e.status === 401 ? "This gateway has an admin token: enter it to see the dashboard."
            : "The gateway refused the request (403 Forbidden): " + (e.body.detail || "no detail given");
          setText("auth-detail", e.status === 401 ? (e.body.detail || "") : "");
          $("token-input").focus();
        }
        function forget() {
          session(null); token = null; stop();
          lastTick = null; startedAt = null; skipped = 0; durableBase = null; attempt = 0;
          for (const k of SERIES) series[k] = [];
          $("events").replaceChildren(); $("events-empty").hidden = false; $("notable-skipped").hidden = true;
          $("device-view").replaceChildren(); $("device-search-input").value = "";
          for (const id of ["received-total", "delivered-total", "held", "stored", "unacked", "connected", "received-rate", "delivered-rate"]) setText(id, "–");
          drawAll(); start();
        }
        $("token-form").addEventListener("submit", ev => {
          ev.preventDefault();
          const t = $("token-input").value.trim();
          if (!t) return;
          if (/[^\x20-\x7e\xa0-\xff]/.test(t)) { $("auth-message").className = "error"; $("auth-message").textContent = "A token with control characters or characters beyond Latin-1 cannot be sent in a header."; return; }
          token = t; session(t); $("token-input").value = ""; start();
        });
        $("forget-token").addEventListener("click", forget);
        function backoff() { return Math.min(30, 2 ** attempt++) * (0.8 + Math.random() * 0.4); }

        // ---- the live stream: fetch (EventSource cannot send a header), event-stream parsed here
        function sseParser(onEvent) {
          let buf = "", type = "", data = [];
          function line(l) {
            if (l === "") { if (data.length) onEvent(type || "message", data.join("\n")); type = ""; data = []; return; }
            if (l[0] === ":") return;
            const i = l.indexOf(":");
            const f = i < 0 ? l : l.slice(0, i);
            let v = i < 0 ? "" : l.slice(i + 1);
            if (v[0] === " ") v = v.slice(1);
            if (f === "event") type = v; else if (f === "data") data.push(v);
          }
          return text => {
            buf += text;
            let start = 0;
            for (let i = 0; i < buf.length; i++) {
              const c = buf[i];
              if (c !== "\n" && c !== "\r") continue;
              if (c === "\r" && i + 1 === buf.length) break; // maybe half of a CRLF: wait for the next chunk
              line(buf.slice(start, i));
              if (c === "\r" && buf[i + 1] === "\n") i++;
              start = i + 1;
            }
            buf = buf.slice(start);
          };
        }
        async function connect(g) {
          const c = ctl = new AbortController();
          let dog = 0, why = "";
          const kick = () => { clearTimeout(dog); dog = setTimeout(() => { why = "nothing received for 15 s"; c.abort(); }, 15000); };
          try {
            setStatus(attempt ? "reconnecting" : "connecting", attempt ? "bad" : "");
            const res = await fetch(BASE + "/v1/admin/events", { headers: { ...headers(), accept: "text/event-stream" }, cache: "no-store", signal: c.signal });
            if (!res.ok) throw await errorOf(res);
            setStatus("live", "live"); kick();
            const reader = res.body.getReader(), dec = new TextDecoder(), feed = sseParser(onEvent);
            for (;;) {
              const { value, done } = await reader.read();
              if (done) { why = "the stream ended"; break; }
              kick(); feed(dec.decode(value, { stream: true }));
            }
          } catch (e) {
            if (g !== gen) return;
            if (isAuth(e)) return showAuth(e);
            why = why || e.message || String(e);
          } finally { clearTimeout(dog); }
          if (g !== gen) return;
          c.abort();
          const d = backoff();
          setStatus("reconnecting in " + Math.round(d) + " s", "bad", why);
          retryTimer = setTimeout(() => { if (g === gen) connect(g); }, d * 1000);
        }
        function onEvent(type, data) {
          let v;
          try { v = JSON.parse(data); } catch (_) { console.warn("unreadable " + type + " event", data); return; }
          // One odd event must not end the stream (its reader would reconnect in a loop).
          try { if (type === "stats") onTick(v); else if (type === "notable") onNotable(v); }
          catch (e) { console.error("cannot show a " + type + " event", e, data); }
        }

        // ---- figures
        function add(k, t, v) {
          const s = series[k] || (series[k] = []);
          s.push([t, v]);
          while (s.length && s[0][0] < t - WINDOW) s.shift();
        }
        function onTick(t) {
          attempt = 0;
          const p = lastTick, T = t.totals || {};
          lastTick = t;
          setText("received-total", int(T.received)); setText("delivered-total", int(T.delivered));
          for (const k of TOTALS) setText("t-" + k, fmt(T[k]));
          if (durableBase) for (const k of TOTALS) setText("d-" + k, fmt(durableBase[k] + (T[k] || 0)));
          for (const k of ["held", "stored", "unacked"]) { setText(k, int(t[k])); add(k, t.time, t[k]); }
          setText("connected", int(t.connectedDevices)); add("connected", t.time, t.connectedDevices);
          const dt = p ? (t.time - p.time) / 1000 : 0;
          // A total that went down means the gateway restarted: no rate across that.
          if (dt > 0 && p.totals && T.received >= p.totals.received && T.delivered >= p.totals.delivered) {
            const rr = (T.received - p.totals.received) / dt, dr = (T.delivered - p.totals.delivered) / dt;
            setText("received-rate", rate(rr)); setText("delivered-rate", rate(dr));
            add("received", t.time, rr); add("delivered", t.time, dr);
          }
          bars("drops", t.droppedByReason, "no drops");
          bars("kinds", t.deliveredByKind, "nothing delivered yet");
          const b = t.budgetExhausted || {};
          setText("budget-app", fmt(b.app || 0)); setText("budget-device", fmt(b.device || 0));
          if (t.notableSkipped > 0) {
            skipped += t.notableSkipped;
            $("notable-skipped").hidden = false;
            setText("notable-skipped", fmt(skipped) + " notable events not shown: the stream sends at most 100 a second");
          }
          if (startedAt) setText("uptime", "up " + age(t.time - startedAt));
          drawAll();
        }
        function bars(id, counts, none) {
          const rows = Object.entries(counts || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
          const max = Math.max(1, ...rows.map(r => r[1]));
          const box = $(id);
          if (!rows.length) return box.replaceChildren(el("span", { class: "muted", style: "grid-column:1/-1" }, none));
          box.replaceChildren(...rows.flatMap(([k, n]) => {
            const bar = el("div", { class: "bar" });
            bar.style.width = (100 * n / max) + "%";
            return [el("span", null, k), el("b", { class: "n" }, fmt(n)), bar];
          }));
        }
        function drawAll() { for (const k of SERIES) draw(k); }
        function draw(k) {
          const cv = $("c-" + k), data = series[k] || [];
          const r = cv.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
          const w = Math.max(1, Math.round(r.width * dpr)), h = Math.max(1, Math.round(r.height * dpr));
          if (cv.width !== w || cv.height !== h) { cv.width = w; cv.height = h; }
          const g = cv.getContext("2d"), css = getComputedStyle(document.documentElement);
          g.clearRect(0, 0, w, h);
          g.fillStyle = css.getPropertyValue("--line").trim();
          g.fillRect(0, h - dpr, w, dpr);
          let max = 0;
          for (const [, v] of data) max = Math.max(max, v);
          setText("peak-" + k, data.length ? "peak " + rate(max) : "");
          if (!data.length) return;
          // The last 5 minutes; until there are 5, at least one minute so that the first ticks show as such.
          const end = data[data.length - 1][0], span = Math.max(60000, end - data[0][0]), top = max > 0 ? max * 1.1 : 1;
          const x = t => w - (end - t) / span * w, y = v => h - dpr - v / top * (h - 4 * dpr);
          const col = css.getPropertyValue(cv.dataset.color).trim();
          g.strokeStyle = g.fillStyle = col; g.lineWidth = 1.5 * dpr; g.lineJoin = "round";
          // One path per run of ticks; a gap (a reconnect) is left open.
          let run = [];
          const flush = () => {
            if (!run.length) return;
            g.beginPath(); run.forEach(([t, v], i) => i ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))); g.stroke();
            g.lineTo(x(run[run.length - 1][0]), h); g.lineTo(x(run[0][0]), h); g.closePath();
            g.globalAlpha = 0.15; g.fill(); g.globalAlpha = 1; run = [];
          };
          for (const pt of data) { if (run.length && pt[0] - run[run.length - 1][0] > 5000) flush(); run.push(pt); }
          flush();
        }
        addEventListener("resize", drawAll);
        matchMedia("(prefers-color-scheme: dark)").addEventListener("change", drawAll);

        function devLink(id) { return el("button", { type: "button", class: "link", onclick: () => inspect(id, true) }, id); }
        function onNotable(e) {
          const kind = ["held", "released", "dropped"].includes(e.kind) ? e.kind : "other";
          const li = el("li", null,
            el("span", { class: "mono muted", title: iso(e.time) }, hms(e.time)),
            el("span", { class: "kind k-" + kind }, e.kind),
            el("span", null, e.detail || ""),
            el("span", { class: "meta" }, e.deviceId ? devLink(e.deviceId) : null, " " + (e.topic || "") + " · ", el("code", null, e.apnsId || "")));
          const list = $("events");
          list.prepend(li);
          while (list.children.length > CAP) list.lastChild.remove();
          $("events-empty").hidden = true;
        }

        // ---- /v1/admin/stats, every 10 s
        async function refreshStats() {
          const g = gen;
          try { const s = await api("/v1/admin/stats"); if (g === gen) onStats(s); }
          catch (e) { if (g !== gen) return; if (isAuth(e)) showAuth(e); else setText("stats-time", "stats failed: " + e.message); }
        }
        function onStats(s) {
          startedAt = s.startedAt;
          setText("started", "started " + iso(s.startedAt));
          setText("devices-count", fmt(s.devices));
          setText("stats-time", "as of " + hms(Date.now()) + " UTC");
          const T = s.totals || {}, D = s.durableTotals || {};
          durableBase = {};
          for (const k of TOTALS) durableBase[k] = (D[k] || 0) - (T[k] || 0);
          const now = k => (lastTick ? lastTick.totals[k] : T[k]) || 0;
          $("totals").replaceChildren(...TOTALS.map(k => el("tr", null, el("td", null, k),
            el("td", { class: "n", id: "t-" + k }, fmt(now(k))), el("td", { class: "n", id: "d-" + k }, fmt(durableBase[k] + now(k))))));
          if (!lastTick) {
            setText("received-total", int(T.received)); setText("delivered-total", int(T.delivered));
            for (const k of ["held", "stored", "unacked"]) setText(k, int(s[k]));
            setText("connected", int(s.connectedDevices));
          }
          const topics = s.topics || [];
          $("topics").replaceChildren(...(topics.length ? topics.map(t => el("tr", null, el("td", { class: "mono" }, t.topic),
            ...["registrations", "held", "stored", "unacked"].map(k => el("td", { class: "n" }, fmt(t[k])))))
            : [el("tr", null, el("td", { colspan: 5, class: "muted" }, "no topics"))]));
          $("topics-truncated").hidden = !s.topicsTruncated;
          const held = s.topHeldDevices || [];
          $("top-held").replaceChildren(...(held.length ? held.map(d => el("tr", null, el("td", null, devLink(d.deviceId)),
            el("td", { class: "n" }, fmt(d.held)), el("td", { title: iso(d.oldestHeldAt) }, age(now() - d.oldestHeldAt) + " ago")))
            : [el("tr", null, el("td", { colspan: 3, class: "muted" }, "nothing held"))]));
          $("held-truncated").hidden = !s.truncated;
        }

        // ---- one device, and why each of its notifications waits
        $("device-form").addEventListener("submit", ev => { ev.preventDefault(); inspect($("device-search-input").value, false); });
        async function inspect(id, scroll) {
          id = id.trim();
          if (!id) return;
          $("device-search-input").value = id;
          const n = ++deviceReq, view = $("device-view");
          if (scroll) $("p-device").scrollIntoView({ behavior: "smooth", block: "start" });
          view.replaceChildren(el("p", { class: "muted" }, "reading ", el("code", null, id), "…"));
          try {
            const d = await api("/v1/admin/devices/" + encodeURIComponent(id));
            if (n === deviceReq) view.replaceChildren(...deviceView(d));
          } catch (e) {
            if (n !== deviceReq) return;
            if (isAuth(e)) return showAuth(e);
            view.replaceChildren(el("p", { class: "error" }, e.status === 404 ? "no such device: " : "could not read the device (" + e.message + "): ", el("code", null, id)));
          }
        }
        function bucket(b) {
          if (!b) return "–";
          const m = el("span", { class: "meter" }, el("i"));
          m.firstChild.style.width = Math.min(100, 100 * b.tokens / Math.max(1, b.capacity)) + "%";
          return el("span", { class: b.tokens < 1 ? "empty" : "" }, m, (Math.floor(b.tokens * 10) / 10) + " of " + b.capacity + " tokens · +" + b.refillPerHour + "/h · ",
            b.nextTokenAt == null ? "full" : "next token " + iso(b.nextTokenAt));
        }
        function deviceView(d) {
          const notes = d.notifications || [], regs = d.registrations || [];
          const count = st => notes.filter(x => x.state === st).length;
          return [
            el("div", { class: "dev-head" }, el("code", null, d.deviceId),
              el("span", { class: "chip " + (d.connected ? "k-released" : "muted") }, d.connected ? "connected" : "offline"),
              el("span", { class: "chip" + (d.power === "lowPower" ? " k-held" : "") }, "power: " + d.power),
              el("span", { class: "muted" }, count("held") + " held · " + count("stored") + " stored · " + count("unacked") + " unacked"),
              el("button", { type: "button", onclick: () => inspect(d.deviceId, false) }, "refresh")),
            el("p", null, el("span", { class: "muted" }, "device bucket: "), bucket(d.bucket)),
            el("h3", null, "Registrations (" + regs.length + ")"),
            regs.length ? el("div", { class: "regs" }, ...regs.map(r => el("div", null,
              el("div", { class: "meta" }, el("code", { class: "topic" }, r.topic), el("span", { class: "chip" + (r.appState === "terminated" ? " k-dropped" : "") }, r.appState), bucket(r.bucket)),
              r.fetch ? el("div", { class: "meta" }, el("span", { class: "muted" }, "fetch: "), r.fetch.explanation,
                r.fetch.interval !== "minimum" ? el("span", { class: "chip" }, "interval " + (r.fetch.interval === "never" ? "never" : r.fetch.interval + " s")) : null,
                r.fetch.openWindows.length ? el("span", { class: "chip" }, r.fetch.openWindows.length + " window" + (r.fetch.openWindows.length === 1 ? "" : "s") + " open") : null) : null,
              el("code", { class: "muted" }, r.token))))
              : el("p", { class: "muted" }, "no registrations"),
            el("h3", null, "Waiting notifications (" + notes.length + ")"),
            notes.length > SHOWN ? el("p", { class: "note" }, "The first " + SHOWN + " are shown.") : null,
            notes.length ? el("ol", { class: "notes" }, ...notes.slice(0, SHOWN).map(x => el("li", { class: "st-" + x.state },
              el("div", { class: "reason" }, x.reason),
              el("div", { class: "meta" }, el("b", { class: "s-" + x.state }, x.state), el("span", null, x.topic), el("span", null, x.pushType + ", priority " + x.priority),
                el("span", null, "accepted " + iso(x.acceptedAt) + " (" + age(now() - x.acceptedAt) + " ago)"), el("span", null, "expires " + iso(x.expiresAt))),
              el("div", { class: "meta" }, el("code", null, "apns-id " + x.apnsId + (x.seq != null ? " · seq " + x.seq : ""))))))
              : el("p", { class: "muted" }, "nothing waiting for this device")].filter(Boolean);
        }

        start();
        </script>
        </body>
        </html>
        """#
}
