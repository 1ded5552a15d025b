/// The dashboard's script: the token prompt, the event stream read with `fetch`, the figures and
/// charts, the overview every 10 s, the device view.
enum DashboardScript {
    static let js = #"""
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
          // The held devices come with the stats, every few seconds; their ages move with each tick.
          for (const td of document.querySelectorAll("#top-held td[data-since]")) td.textContent = age(t.time - Number(td.dataset.since)) + " ago";
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
          const total = k => (lastTick ? lastTick.totals[k] : T[k]) || 0;
          $("totals").replaceChildren(...TOTALS.map(k => el("tr", null, el("td", null, k),
            el("td", { class: "n", id: "t-" + k }, fmt(total(k))), el("td", { class: "n", id: "d-" + k }, fmt(durableBase[k] + total(k))))));
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
            el("td", { class: "n" }, fmt(d.held)), el("td", { title: iso(d.oldestHeldAt), "data-since": d.oldestHeldAt }, age(now() - d.oldestHeldAt) + " ago")))
            : [el("tr", null, el("td", { colspan: 3, class: "muted" }, "nothing held"))]));
          $("held-truncated").hidden = !s.truncated;
          // A node of a cluster: every figure above is this node's.
          const nodes = s.nodes || [];
          $("p-nodes").hidden = s.scope !== "node";
          setText("nodes-scope", s.scope === "node" ? "figures above are node " + s.node + "'s" : "");
          $("nodes").replaceChildren(...nodes.map(n => el("tr", null,
            el("td", { class: "mono", title: n.address }, n.name + (n.this ? " (this)" : "")),
            el("td", { class: "n" }, fmt(n.devicesHeld)), el("td", null, iso(n.startedAt)), el("td", null, hms(n.leaseExpiresAt)))));
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
              ...(d.owner ? [el("span", { class: "chip" }, "node: " + d.owner)] : []),
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
        """#
}
