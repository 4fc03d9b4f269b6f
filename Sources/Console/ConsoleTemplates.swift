/// The console's pages as Mustache templates (swift-mustache), compiled into the binary, and its
/// one stylesheet.
///
/// - Important: every value goes through `{{…}}`, which escapes HTML; no template uses the
///   unescaped `{{{…}}}` form, so a user id or a payload cannot inject markup. Pages carry no
///   script: the overview refreshes itself with `<meta http-equiv="refresh">`.
enum ConsoleTemplates {
    static let all: [String: String] = [
        "layout": layout, "overview": overview, "jobs": jobs, "job": job, "users": users, "user": user,
        "dead-letters": deadLetters, "control": control, "confirm": confirm, "message": message,
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        {{$head}}{{/head}}
        <title>{{$title}}Herald{{/title}} · Herald console</title>
        <link rel="stylesheet" href="/style.css">
        </head>
        <body>
        <header>
        <a class="brand" href="/">Herald</a>
        <nav>
        <a href="/"{{#nav.overview}} aria-current="page"{{/nav.overview}}>Overview</a>
        <a href="/jobs"{{#nav.jobs}} aria-current="page"{{/nav.jobs}}>Jobs</a>
        <a href="/users"{{#nav.users}} aria-current="page"{{/nav.users}}>Users</a>
        <a href="/dead-letters"{{#nav.deadLetters}} aria-current="page"{{/nav.deadLetters}}>Dead letters</a>
        <a href="/control"{{#nav.control}} aria-current="page"{{/nav.control}}>Pause &amp; cancel</a>
        </nav>
        <span class="who">{{account}} · {{role}}</span>
        </header>
        <main>
        {{$content}}{{/content}}
        </main>
        </body>
        </html>
        """

    static let overview = """
        {{<layout}}
        {{$head}}<meta http-equiv="refresh" content="15">{{/head}}
        {{$title}}Overview{{/title}}
        {{$content}}
        <h1>Overview</h1>
        <p class="muted">As of {{now}} UTC; this page refreshes every 15 s.</p>
        <section class="cards">
        <div class="card"><span class="label">Due now</span><span class="value" id="due">{{depth.pendingDue}}</span></div>
        <div class="card"><span class="label">Scheduled</span><span class="value">{{depth.pendingScheduled}}</span></div>
        <div class="card"><span class="label">Sending</span><span class="value">{{depth.running}}</span></div>
        <div class="card"><span class="label">Held by a pause</span><span class="value">{{depth.paused}}</span></div>
        <div class="card{{#lagWarning}} warn{{/lagWarning}}"><span class="label">Lag (oldest due)</span><span class="value">{{lag}}</span></div>
        <div class="card{{#deadLetterWarning}} warn{{/deadLetterWarning}}"><span class="label">Dead letters</span><span class="value"><a href="/dead-letters">{{depth.deadLetters}}</a></span></div>
        <div class="card"><span class="label">Delivered, last hour</span><span class="value" id="delivered">{{deliveredLastHour}}</span></div>
        <div class="card"><span class="label">Active devices</span><span class="value">{{activeDevices}}</span></div>
        </section>

        <h2>Paused</h2>
        {{#hasPauses}}
        <div class="scroll"><table id="pauses">
        <thead><tr><th>Target</th><th>Until</th><th>By</th><th>Since</th></tr></thead>
        <tbody>{{#pauses}}<tr><td>{{target}}</td><td>{{until}}</td><td>{{by}}</td><td>{{since}}</td></tr>{{/pauses}}</tbody>
        </table></div>
        {{/hasPauses}}
        {{^pauses}}<p class="muted">Nothing is paused.</p>{{/pauses}}

        <h2>Providers (this replica)</h2>
        <div class="scroll"><table id="providers">
        <thead><tr><th>Provider</th><th>Adapter</th><th>Circuit</th></tr></thead>
        <tbody>{{#providers}}<tr><td>{{name}}</td><td>{{adapter}}</td><td><span class="badge {{circuitClass}}">{{circuit}}</span></td></tr>{{/providers}}</tbody>
        </table></div>

        <h2>Deadlines</h2>
        {{#hasDeadlines}}
        <div class="scroll"><table id="deadlines">
        <thead><tr><th>Category</th><th>Deadline</th><th>Waiting past it now</th><th>Delivered, last hour</th><th>Deadline alerts, last hour</th><th></th></tr></thead>
        <tbody>{{#deadlines}}<tr><td>{{category}}</td><td>{{deadline}}</td><td>{{waiting}}</td><td>{{delivered}}</td><td>{{alerts}}</td><td><span class="badge {{statusClass}}">{{status}}</span></td></tr>{{/deadlines}}</tbody>
        </table></div>
        {{/hasDeadlines}}
        {{^deadlines}}<p class="muted">No category has a deadline (<code>herald.categories.deadline</code>).</p>{{/deadlines}}

        <h2>Provider attempts per minute</h2>
        {{#hasMinutes}}
        <div class="scroll"><table id="throughput">
        <thead><tr><th>Minute (UTC)</th><th>Accepted</th><th>Failed</th><th></th></tr></thead>
        <tbody>{{#minutes}}<tr><td>{{minute}}</td><td>{{accepted}}</td><td>{{failed}}</td><td><meter min="0" max="{{max}}" value="{{accepted}}">{{accepted}}</meter></td></tr>{{/minutes}}</tbody>
        </table></div>
        {{/hasMinutes}}
        {{^minutes}}<p class="muted">No provider attempt in the last 15 minutes.</p>{{/minutes}}

        <h2>Outbox by app and category</h2>
        {{#hasDepthCells}}
        <div class="scroll"><table id="depth">
        <thead><tr><th>App</th><th>Category</th><th>State</th><th>Jobs</th></tr></thead>
        <tbody>{{#depthCells}}<tr><td>{{appID}}</td><td><a href="/jobs?category={{category}}">{{category}}</a></td><td>{{state}}</td><td>{{jobs}}</td></tr>{{/depthCells}}</tbody>
        </table></div>
        {{/hasDepthCells}}
        {{^depthCells}}<p class="muted">The outbox is empty.</p>{{/depthCells}}
        {{/content}}
        {{/layout}}
        """

    static let jobs = """
        {{<layout}}
        {{$title}}Jobs{{/title}}
        {{$content}}
        <h1>Jobs</h1>
        <form method="get" action="/jobs" class="filters">
        <label>User <input name="user" value="{{filter.user}}"></label>
        <label>Category <select name="category"><option value="">any</option>{{#categories}}<option{{#selected}} selected{{/selected}}>{{name}}</option>{{/categories}}</select></label>
        <label>State <select name="state"><option value="">any</option>{{#states}}<option{{#selected}} selected{{/selected}}>{{name}}</option>{{/states}}</select></label>
        <label>Dedup key <input name="dedup" value="{{filter.dedup}}"></label>
        <label>Since <select name="since">{{#sinces}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/sinces}}</select></label>
        <button type="submit">Search</button>
        </form>
        <p class="muted">{{count}} job(s){{#limited}}, the newest {{limit}} shown{{/limited}}. Pending and running jobs are always searched; finished jobs over the chosen period, among the newest 5,000 matching records.</p>
        {{#hasRows}}
        <div class="scroll"><table id="results">
        <thead><tr><th>Job</th><th>User</th><th>Category</th><th>State</th><th>Reason</th><th>At</th></tr></thead>
        <tbody>{{#rows}}<tr><td><a href="/jobs/{{id}}">{{id}}</a></td><td><a href="/users/{{userPath}}">{{userID}}</a></td><td>{{category}}</td><td><span class="badge {{stateClass}}">{{state}}</span></td><td>{{reason}}</td><td>{{at}}</td></tr>{{/rows}}</tbody>
        </table></div>
        {{/hasRows}}
        {{/content}}
        {{/layout}}
        """

    static let job = """
        {{<layout}}
        {{$title}}Job {{id}}{{/title}}
        {{$content}}
        <h1>Job {{id}}</h1>
        <p>For <a href="/users/{{userPath}}">{{userID}}</a>, category {{category}}: <span class="badge {{stateClass}}">{{state}}</span></p>
        <p class="muted">Every record of this job, oldest first (<code>herald explain {{id}}</code>).</p>
        <div class="scroll"><table id="records">
        <thead><tr><th>Time</th><th>Event</th><th>Provider</th><th>Outcome</th><th>Status</th><th>Reason</th><th>Attempt</th><th>ms</th><th>Worker</th></tr></thead>
        <tbody>{{#records}}<tr><td>{{time}}</td><td>{{event}}</td><td>{{provider}}</td><td>{{outcome}}</td><td>{{status}}</td><td>{{reason}}</td><td>{{attempt}}</td><td>{{ms}}</td><td>{{worker}}</td></tr>{{/records}}</tbody>
        </table></div>
        {{/content}}
        {{/layout}}
        """

    static let users = """
        {{<layout}}
        {{$title}}Users{{/title}}
        {{$content}}
        <h1>Why didn't a user get it?</h1>
        <form method="get" action="/users" class="filters">
        <label>User id <input name="user" required></label>
        <button type="submit">Show</button>
        </form>
        {{/content}}
        {{/layout}}
        """

    static let user = """
        {{<layout}}
        {{$title}}User {{userID}}{{/title}}
        {{$content}}
        <h1>User {{userID}}</h1>
        <p><a href="/jobs?user={{userQuery}}">Search this user's jobs</a> · {{pending}} job(s) waiting</p>
        {{#hasSuggestions}}
        <h2>What may be wrong</h2>
        <ul id="suggestions">{{#suggestions}}<li>{{.}}</li>{{/suggestions}}</ul>
        {{/hasSuggestions}}
        <h2>Devices</h2>
        {{#hasDevices}}
        <div class="scroll"><table id="devices">
        <thead><tr><th>Device</th><th>Provider</th><th>App</th><th>Token (hash)</th><th>Status</th><th>Permission</th><th>Locale</th><th>Registered</th></tr></thead>
        <tbody>{{#devices}}<tr><td>{{id}}</td><td>{{provider}} ({{environment}})</td><td>{{appID}}</td><td><code>#{{tokenHash}}</code></td><td><span class="badge {{statusClass}}">{{status}}</span></td><td>{{permission}}</td><td>{{locale}}</td><td>{{registeredAt}}</td></tr>{{/devices}}</tbody>
        </table></div>
        {{/hasDevices}}
        {{^devices}}<p class="muted">No device is registered.</p>{{/devices}}
        <h2>Preferences</h2>
        <ul id="preferences">{{#preferences}}<li>{{.}}</li>{{/preferences}}</ul>
        <h2>Last notifications</h2>
        {{#hasNotifications}}
        <div class="scroll"><table id="notifications">
        <thead><tr><th>Job</th><th>Category</th><th>First seen</th><th>Outcome</th><th>Reason</th><th>Last record</th></tr></thead>
        <tbody>{{#notifications}}<tr><td><a href="/jobs/{{jobID}}">{{jobID}}</a></td><td>{{category}}</td><td>{{firstSeen}}</td><td><span class="badge {{statusClass}}">{{status}}</span></td><td>{{reason}}</td><td>{{event}} {{provider}} {{outcome}}</td></tr>{{/notifications}}</tbody>
        </table></div>
        {{/hasNotifications}}
        {{^notifications}}<p class="muted">No notification on record.</p>{{/notifications}}
        {{/content}}
        {{/layout}}
        """

    static let deadLetters = """
        {{<layout}}
        {{$title}}Dead letters{{/title}}
        {{$content}}
        <h1>Dead letters</h1>
        <form method="get" action="/dead-letters" class="filters">
        <label>Category <select name="category"><option value="">any</option>{{#categories}}<option{{#selected}} selected{{/selected}}>{{name}}</option>{{/categories}}</select></label>
        <label>Reason contains <input name="reason" value="{{filter.reason}}"></label>
        <label>Provider <select name="provider"><option value="">any</option>{{#providers}}<option{{#selected}} selected{{/selected}}>{{name}}</option>{{/providers}}</select></label>
        <button type="submit">Filter</button>
        </form>
        <p class="muted">{{count}} open dead letter(s){{#limited}}, the newest {{limit}} shown{{/limited}}.</p>
        {{#hasRows}}
        <form method="post" action="/dead-letters">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <div class="scroll"><table id="dead-letters">
        <thead><tr>{{#canAct}}<th></th>{{/canAct}}<th>Id</th><th>Job</th><th>User</th><th>Category</th><th>Attempts</th><th>Last error</th><th>Failed at</th></tr></thead>
        <tbody>{{#rows}}<tr>{{#canAct}}<td><input type="checkbox" name="id" value="{{id}}" aria-label="select {{id}}"></td>{{/canAct}}<td>{{id}}</td><td><a href="/jobs/{{jobID}}">{{jobID}}</a></td><td><a href="/users/{{userPath}}">{{userID}}</a></td><td>{{category}}</td><td>{{attempts}}</td><td>{{lastError}}</td><td>{{failedAt}}</td></tr>{{/rows}}</tbody>
        </table></div>
        {{#canAct}}
        <p class="actions">
        <button type="submit" name="action" value="replay">Replay selected</button>
        <button type="submit" name="action" value="purge" class="danger">Purge selected</button>
        </p>
        {{/canAct}}
        </form>
        {{/hasRows}}
        {{^canAct}}<p class="muted">Your role (viewer) can look, not act.</p>{{/canAct}}
        {{/content}}
        {{/layout}}
        """

    static let control = """
        {{<layout}}
        {{$title}}Pause &amp; cancel{{/title}}
        {{$content}}
        <h1>Pause, resume, cancel</h1>
        <h2>In force</h2>
        {{#hasPauses}}
        <div class="scroll"><table id="pauses">
        <thead><tr><th>Target</th><th>Until</th><th>By</th><th>Since</th>{{#canAct}}<th></th>{{/canAct}}</tr></thead>
        <tbody>{{#pauses}}<tr><td>{{target}}</td><td>{{until}}</td><td>{{by}}</td><td>{{since}}</td>{{#canAct}}<td>
        <form method="post" action="/control"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="resume"><input type="hidden" name="category" value="{{category}}"><input type="hidden" name="app" value="{{app}}"><button type="submit">Resume</button></form>
        </td>{{/canAct}}</tr>{{/pauses}}</tbody>
        </table></div>
        {{/hasPauses}}
        {{^pauses}}<p class="muted">Nothing is paused.</p>{{/pauses}}
        {{#canAct}}
        <h2>Pause</h2>
        <p class="muted">Paused jobs stay pending and are not sent; nothing is lost. Leave category and app empty to pause everything.</p>
        <form method="post" action="/control" class="filters" id="pause-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="pause">
        <label>Category <select name="category"><option value="">—</option>{{#categories}}<option>{{name}}</option>{{/categories}}</select></label>
        <label>or app <select name="app"><option value="">—</option>{{#apps}}<option>{{.}}</option>{{/apps}}</select></label>
        <label>For minutes <input name="minutes" inputmode="numeric" placeholder="until resumed"></label>
        <button type="submit">Pause…</button>
        </form>
        <h2>Cancel pending</h2>
        <p class="muted">Cancels what is still pending (not what a provider already accepted); each job is logged with reason <code>cancelled</code>.</p>
        <form method="post" action="/control" class="filters" id="cancel-form">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="cancel">
        <label>Category <select name="category"><option value="">—</option>{{#categories}}<option>{{name}}</option>{{/categories}}</select></label>
        <label>Scope <input name="scope"></label>
        <label>App <select name="app"><option value="">—</option>{{#apps}}<option>{{.}}</option>{{/apps}}</select></label>
        <button type="submit" class="danger">Cancel…</button>
        </form>
        {{/canAct}}
        {{^canAct}}<p class="muted">Your role (viewer) can look, not act.</p>{{/canAct}}
        <h2>Audit log</h2>
        {{#hasAudit}}
        <div class="scroll"><table id="audit">
        <thead><tr><th>At</th><th>Who</th><th>Action</th><th>Target</th><th>Jobs</th></tr></thead>
        <tbody>{{#audit}}<tr><td>{{at}}</td><td>{{actor}}</td><td>{{action}}</td><td><code>{{targetJSON}}</code></td><td>{{jobs}}</td></tr>{{/audit}}</tbody>
        </table></div>
        {{/hasAudit}}
        {{^audit}}<p class="muted">No operator action yet.</p>{{/audit}}
        {{/content}}
        {{/layout}}
        """

    static let confirm = """
        {{<layout}}
        {{$title}}Confirm{{/title}}
        {{$content}}
        <h1>Confirm</h1>
        <p class="confirm" id="question">{{question}}</p>
        <form method="post" action="{{action}}">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="confirmed" value="yes">
        {{#fields}}<input type="hidden" name="{{name}}" value="{{value}}">{{/fields}}
        <p class="actions"><button type="submit" class="{{buttonClass}}">{{button}}</button> <a href="{{back}}">Back</a></p>
        </form>
        {{/content}}
        {{/layout}}
        """

    static let message = """
        {{<layout}}
        {{$title}}{{heading}}{{/title}}
        {{$content}}
        <h1>{{heading}}</h1>
        <p class="{{class}}" id="message">{{text}}</p>
        <p><a href="{{back}}">Back</a></p>
        {{/content}}
        {{/layout}}
        """

    static let stylesheet = """
        :root { --fg: #1d2330; --muted: #5d6678; --line: #d9dde5; --bg: #f6f7f9; --card: #fff; --accent: #2456c9;
                --ok: #1f7a44; --warn: #9a5b00; --bad: #b42318; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
        header { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .7rem 1.2rem;
                 background: #16203a; color: #fff; }
        header a { color: #dfe6f8; text-decoration: none; }
        header nav { display: flex; flex-wrap: wrap; gap: .3rem 1rem; flex: 1; }
        header nav a[aria-current] { color: #fff; border-bottom: 2px solid #8fb0ff; }
        .brand { font-weight: 700; font-size: 1.1rem; color: #fff; }
        .who { color: #b8c3de; font-size: .9rem; }
        main { max-width: 1200px; margin: 0 auto; padding: 1rem 1.2rem 3rem; }
        h1 { font-size: 1.5rem; margin: .4rem 0 .8rem; }
        h2 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; }
        a { color: var(--accent); }
        .muted { color: var(--muted); }
        .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: .7rem; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .7rem .9rem; }
        .card .label { display: block; color: var(--muted); font-size: .82rem; }
        .card .value { display: block; font-size: 1.5rem; font-weight: 600; }
        .card.warn { border-color: var(--warn); }
        .scroll { overflow-x: auto; background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
        table { border-collapse: collapse; width: 100%; font-size: .9rem; }
        th, td { text-align: left; padding: .45rem .7rem; border-bottom: 1px solid var(--line); white-space: nowrap; }
        td:nth-last-child(-n+2) { white-space: normal; }
        tbody tr:last-child td { border-bottom: none; }
        th { background: #eef1f6; font-weight: 600; }
        code { font-size: .85rem; }
        .badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem; background: #e8ebf1; }
        .badge.ok { background: #dcf2e4; color: var(--ok); }
        .badge.warn { background: #fdf0d8; color: var(--warn); }
        .badge.bad { background: #fde4e1; color: var(--bad); }
        form.filters { display: flex; flex-wrap: wrap; gap: .6rem 1rem; align-items: flex-end; margin: .5rem 0 1rem; }
        label { display: flex; flex-direction: column; font-size: .85rem; color: var(--muted); gap: .2rem; }
        input, select, button { font: inherit; padding: .35rem .55rem; border: 1px solid var(--line); border-radius: 6px; background: #fff; color: var(--fg); }
        button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
        button.danger { background: var(--bad); border-color: var(--bad); }
        td form { margin: 0; }
        .actions { display: flex; gap: 1rem; align-items: center; }
        .confirm { font-size: 1.1rem; background: var(--card); border: 1px solid var(--warn); border-radius: 8px; padding: 1rem; }
        .error { color: var(--bad); }
        .done { color: var(--ok); }
        meter { width: 140px; }
        @media (max-width: 600px) { main { padding: .8rem .7rem 2rem; } .card .value { font-size: 1.25rem; } }
        """
}
