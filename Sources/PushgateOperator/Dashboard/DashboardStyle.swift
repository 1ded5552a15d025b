/// The dashboard's style sheet: light and dark colours, the layout at 1280×800 and on a phone.
enum DashboardStyle {
    static let css = #"""
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
        """#
}
