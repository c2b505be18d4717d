// The tinyagents web console: plain JavaScript, no build step, no network access but this
// server's /api/agents. Text that comes from runs is only ever set with textContent.
"use strict";

(() => {
  const API = "/api/agents";
  const TOKEN_KEY = "tinyagents.token";
  // The commands this tab sent, kept for a reload (in the tab's sessionStorage, beside its
  // token; forgotten with it).
  const SENT_KEY = "tinyagents.sent";
  const POLL_MS = 1000;
  const MAX_TREES = 12;
  // GET /runs answers a page at a time, newest first. Each poll asks for the newest page,
  // the live runs (however old) and the selected run's whole tree: what an operator needs
  // when a tenant has more runs than one page holds.
  const PAGE = 200;
  const TREE_PAGE = 1000;
  const LIVE = ["running", "paused", "interrupted"];
  const MAX_EVENTS = 500;
  // The fields whose text is written for the selected run: they follow it (a run picked
  // with text written for another, by a click or Back, steered the run it was not for).
  const DRAFT_FIELDS = ["steer-input", "tools-input"];
  // The server's bound on a command's payload (steering.policies.DEFAULT_MAX_TEXT_BYTES):
  // UTF-8 bytes of its compact JSON, not characters (an "é" is two bytes, a newline's
  // escape two, an emoji four).
  const MAX_PAYLOAD_BYTES = 16384;
  // How often a stream the browser gave up on is opened again.
  const REOPEN_MS = 3000;
  // Outcomes kept of commands other pages sent (those of this page's own are always kept):
  // an event of a command this page sends can arrive before its receipt names it.
  const MAX_OUTCOMES = 200;
  // Pages of a run's command history one poll reads at most, looking for the outcomes of
  // the commands this page sent that are still open (100 commands a page).
  const MAX_STEERING_PAGES = 50;
  const FINISHED = new Set(["completed", "cancelled", "aborted", "limit_exceeded", "failed"]);
  const TERMINAL = new Set(["steering.rejected", "steering.applied", "steering.superseded", "steering.failed"]);
  // The server names each SSE message after its event type; EventSource only hands named
  // messages to listeners registered for that name.
  const EVENT_TYPES = [
    "run.started", "run.status", "run.paused", "run.resumed", "run.completed", "run.cancelled",
    "run.aborted", "run.failed", "run.interrupted", "run.limit_exceeded",
    "model.request", "model.response", "model.error", "model.delta",
    "tool.call", "tool.result",
    "subagent.started", "subagent.completed", "subagent.steered",
    "steering.requested", "steering.accepted", "steering.rejected", "steering.deferred",
    "steering.delivered", "steering.applied", "steering.superseded", "steering.failed",
    "limit.exceeded", "limit.warning",
    "graph.started", "graph.step", "graph.task_started", "graph.task_completed",
    "graph.task_failed", "graph.task_cancelled", "graph.interrupt", "graph.resumed",
    "graph.goto", "graph.state_updated", "graph.completed",
    "supervisor.rule_fired", "supervisor.judge_verdict", "supervisor.judge_error",
    "supervisor.action", "supervisor.escalated",
  ];
  const OUTCOME_TEXT = {
    "steering.requested": "requested",
    "steering.accepted": "accepted, waiting for the run's next safe point",
    "steering.deferred": "deferred, waiting for its target",
    "steering.delivered": "delivered to the run",
    "steering.applied": "applied",
    "steering.rejected": "rejected",
    "steering.superseded": "superseded",
    "steering.failed": "failed",
  };

  const $ = (id) => document.getElementById(id);
  const state = {
    token: null,
    runs: new Map(), // run_id -> snapshot
    selected: null, // run_id
    root: null, // root_run_id followed over SSE
    source: null, // EventSource
    // The highest SSE id shown: the server sends a stream's events in id order, so what a
    // reconnect (with Last-Event-ID) replays is at or below it. A number, not a set of every
    // id: the page may follow one tree for days.
    lastSeen: 0,
    // The event log those ids count in (a stream's first message names it): a server without
    // a store counts from 1 again when it restarts, under another name.
    log: null,
    outcomes: new Map(), // correlation_id -> last steering event seen (bounded: keepOutcome)
    sent: [], // commands sent from this page, newest first
    polling: false,
    more: false, // the server has older runs than the newest page shows
    open: false, // a server started with --insecure-dev asks for no token
    // What was written in a run's fields (DRAFT_FIELDS) while another run is selected:
    // run_id -> {field id: text}. Only runs with text written are kept; a run's entry goes
    // when it is selected again (back in its fields) or its fields are emptied.
    drafts: new Map(),
    // Counts sign-ins and sign-outs (signIn): an answer that comes after it changed belongs
    // to a session that is over, and nothing of it is shown or kept.
    session: 0,
  };

  // ------------------------------------------------------------------ small DOM helpers

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function toast(message) {
    const box = $("toast");
    box.textContent = message;
    box.classList.add("shown");
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => box.classList.remove("shown"), 6000);
  }

  // Text from runs written beside the page's own words is isolated (U+2068 … U+2069): a
  // right-to-left override in a name or a question (U+202E) reverses that text alone, never
  // the words, counts or parentheses the page writes after it. Isolate marks inside it are
  // dropped, so none closes the isolation early. Printable ASCII has no such marks.
  const ISOLATES = /[\u2066-\u2069]/g;
  function iso(value) {
    const text = String(value);
    return /^[\x20-\x7e]*$/.test(text) ? text : `\u2068${text.replace(ISOLATES, "")}\u2069`;
  }

  // What a reader counts as one letter (a grapheme): an emoji past U+FFFF (two UTF-16 units),
  // a family of emoji joined by U+200D, a flag (two regional indicators), a letter and its
  // combining accents. Without Intl.Segmenter, code points (an emoji still whole).
  const GRAPHEMES =
    typeof Intl !== "undefined" && typeof Intl.Segmenter === "function"
      ? new Intl.Segmenter(undefined, { granularity: "grapheme" })
      : null;

  // ``text`` in at most ``most`` letters: when longer, its first ``most - 1`` and "…". Cut
  // between letters: a cut inside one showed half of it (a lone surrogate, one of a family,
  // a flag's half, an accent lost from its letter).
  function clip(text, most) {
    if (text.length <= most) return text;
    const letters = [];
    for (const piece of GRAPHEMES ? GRAPHEMES.segment(text) : text) {
      letters.push(typeof piece === "string" ? piece : piece.segment);
      if (letters.length > most) return `${letters.slice(0, most - 1).join("")}\u2026`;
    }
    return text;
  }

  function short(id) {
    return id ? iso(id) : "";
  }

  function runName(run) {
    if (!run) return "run";
    if (run.node_id) return `${iso(run.agent_id || "graph")} · ${iso(run.node_id)}`;
    return iso(run.agent_id || run.kind || "run");
  }

  function nameOf(runId) {
    const run = state.runs.get(runId);
    return run ? runName(run) : short(runId);
  }

  function counters(run) {
    const used = run.counters || run.usage || {};
    const parts = [];
    const many = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;
    if (used.model_calls !== undefined) parts.push(many(used.model_calls, "model call"));
    if (used.tool_calls !== undefined) parts.push(many(used.tool_calls, "tool call"));
    const tokens = (used.input_tokens || 0) + (used.output_tokens || 0);
    if (tokens) parts.push(`${tokens} tokens`);
    return parts.join(" · ") || "nothing yet";
  }

  function when(iso) {
    const date = iso ? new Date(iso) : null;
    return date && !Number.isNaN(date.getTime()) ? date.toLocaleTimeString([], { hour12: false }) : "";
  }

  // ------------------------------------------------------------------ token and API

  function takeToken() {
    const url = new URL(window.location.href);
    const hash = new URLSearchParams(url.hash.replace(/^#/, ""));
    const given = hash.get("token") || url.searchParams.get("token");
    if (given) {
      if (given !== sessionStorage.getItem(TOKEN_KEY)) sessionStorage.removeItem(SENT_KEY);
      sessionStorage.setItem(TOKEN_KEY, given);
      hash.delete("token");
      url.searchParams.delete("token");
      const rest = hash.toString();
      // The token leaves the address bar (and so the history and anything copied from it).
      window.history.replaceState(null, "", url.pathname + url.search + (rest ? `#${rest}` : ""));
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  async function api(path, { method = "GET", body } = {}) {
    // the session the request is made in: a 401 that answers it after a sign-out (and
    // perhaps a sign-in with another token) is that session's, not the one in use now
    const session = state.session;
    const headers = { Accept: "application/json" };
    if (state.token) headers.Authorization = `Bearer ${state.token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(API + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (error) {
      return { ok: false, status: 0, data: { detail: `cannot reach the server (${error.message})` } };
    }
    let data = null;
    let text = "";
    const answer = await response.text().catch(() => "");
    try {
      data = JSON.parse(answer);
    } catch (_) {
      data = null;
      text = excerpt(answer); // a proxy's page (its 502), plain text: what it says, shortly
    }
    if (response.status === 401 && session === state.session) {
      // the server's reason: expired, signed by another server's key, ...
      const why = data && typeof data.message === "string" ? ` (${iso(data.message)})` : "";
      signIn(`The server did not accept this token${why}. Paste another one.`);
    }
    return { ok: response.ok, status: response.status, data, text, next: nextLink(response.headers.get("Link")) };
  }

  function excerpt(body) {
    // A body that is no JSON, as text: its tags (and what a script or style holds) left
    // out, its spaces folded, in at most 200 letters (``clip``). It is only ever shown as text.
    const words = String(body)
      .replace(/<(script|style)\b[\s\S]*?<\/\1\s*>/gi, " ")
      .replace(/<[^>]*>/g, " ")
      .replace(/\s+/g, " ")
      .trim();
    return clip(words, 200);
  }

  function nextLink(header) {
    // `Link: <url>; rel="next"`: where the following page is, when there is one.
    const found = /<([^>]*)>\s*;\s*rel="next"/.exec(header || "");
    return found ? found[1] : null;
  }

  function problem(result) {
    // Every error body of the API says what went wrong in one sentence, ``message`` (a 422's
    // ``detail`` is the list of its problems, for programs); other servers' bodies (a proxy's)
    // may hold a ``detail`` alone, or be no JSON: a short excerpt of their text then.
    const data = result.data && typeof result.data === "object" ? result.data : {};
    const said = typeof data.message === "string" && data.message ? data.message : data.detail;
    const json = typeof said === "string" ? said : said ? JSON.stringify(said) : "";
    const text = iso(json || result.text || "");
    const why = {
      0: "network error",
      400: "bad request",
      401: "not signed in",
      // (the server's text says which right is missing: agent:control, or agent:observe)
      403: "this token may not do that",
      404: "no such run (or not yours)",
      422: "invalid input",
    }[result.status] || `HTTP ${result.status}`;
    return text ? `${why}: ${text}` : why;
  }

  // ------------------------------------------------------------------ sign-in

  function signIn(message) {
    stopFollowing();
    // nothing of the last session stays on the page: the next token may be another tenant's
    state.session += 1;
    state.runs = new Map();
    state.selected = null;
    state.lastSeen = 0;
    state.log = null;
    state.outcomes.clear();
    state.sent = [];
    state.more = false;
    state.drafts.clear();
    for (const id of DRAFT_FIELDS) $(id).value = "";
    sizeSteer();
    $("timeline").replaceChildren();
    renderTree();
    renderDetail();
    renderSent();
    $("app").hidden = true;
    $("login").hidden = false;
    $("sign-out").hidden = true;
    $("who").textContent = "not signed in";
    $("login-error").textContent = message || "";
    setConnection("offline");
    state.token = null;
    state.open = false;
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(SENT_KEY);
  }

  function start(token) {
    state.token = token;
    state.open = !token;
    $("login").hidden = true;
    $("app").hidden = false;
    $("sign-out").hidden = !token;
    $("who").textContent = token
      ? "signed in with a token (kept for this tab only)"
      : "no token needed: this server runs in insecure dev mode";
    setConnection("idle");
    poll();
    showLinkedRun();
  }

  async function startWithoutToken() {
    // Without a token, the page still works against a server that asks for none.
    try {
      const response = await fetch(`${API}/runs?limit=1`, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (response.ok) {
        start(null);
        return;
      }
    } catch (_) {
      // unreachable: the sign-in form says what to do
    }
    signIn("");
  }

  // ------------------------------------------------------------------ the run tree

  async function poll() {
    if ((!state.token && !state.open) || state.polling) return;
    state.polling = true;
    const token = state.token;
    try {
      const live = LIVE.map((status) => `status=${status}`).join("&");
      const asks = [api(`/runs?limit=${PAGE}`), api(`/runs?${live}&limit=${PAGE}`)];
      const root = state.root; // the selected run's tree (followed over SSE)
      if (root) asks.push(api(`/runs?root_run_id=${encodeURIComponent(root)}&limit=${TREE_PAGE}`));
      const results = await Promise.all(asks);
      // signed out (or in with another token) meanwhile: this answer is the last session's
      if (state.token !== token || (!state.token && !state.open)) return;
      // The tree is asked for by its root, which a token narrowed to a subtree may not see:
      // then the tree is what the other two listings hold of it.
      const failed = results.slice(0, 2).find((result) => !result.ok || !Array.isArray(result.data));
      if (!failed) {
        const runs = new Map();
        for (const result of results) {
          if (result.ok && Array.isArray(result.data)) for (const run of result.data) runs.set(run.run_id, run);
        }
        // a run opened by its id while this poll was asking (its tree not asked for yet):
        // kept until the next poll brings its tree
        const opened = state.runs.get(state.selected);
        if (state.root !== root && opened && !runs.has(opened.run_id)) runs.set(opened.run_id, opened);
        state.runs = runs;
        // (the live runs too fill more than a page: the newest of them are shown)
        state.more = Boolean(results[0].next || results[1].next);
        resumeStream();
        renderTree();
        renderDetail();
        await pollOutcomes(token);
      } else if (failed.status !== 401) {
        setConnection("error", problem(failed));
      }
    } finally {
      state.polling = false;
    }
  }

  // The outcome of a command the event stream does not bring is read from its run's command
  // history: one sent to a run of another tree than the one followed now (the operator
  // picked another run since), or from a graph task's row (it goes to its graph run, whose
  // events a token narrowed to the task's entry does not receive; the server lists there
  // what was sent to the task).
  //
  // The history is read a page at a time, the newest first, older pages (its rel="next"
  // links) only while a command looked for is not found yet: the newest page holds the
  // latest 100 commands alone, and a command of this page's that more than 100 others moved
  // past between two polls (a busy run, a tab the browser throttled, the network gone a
  // while) stayed "accepted" for good. A command whose steps span pages is on each, its
  // latest steps on the newer one: what is found first is its state.
  async function pollOutcomes(token) {
    const open = new Map(); // run id -> the correlation ids of this page's commands still open
    for (const entry of state.sent) {
      if (!entry.correlationId || outcome(entry).terminal) continue;
      const run = state.runs.get(entry.runId);
      if ((run && run.task_id) || !streamed(entry)) {
        if (!open.has(entry.runId)) open.set(entry.runId, new Set());
        open.get(entry.runId).add(entry.correlationId);
      }
    }
    for (const [runId, wanted] of open) {
      let path = `${runPath(runId)}/steering`;
      for (let page = 0; path && wanted.size && page < MAX_STEERING_PAGES; page += 1) {
        const result = await api(path);
        if (state.token !== token || !result.ok || !Array.isArray(result.data)) break;
        for (const command of result.data) {
          if (!wanted.delete(command.correlation_id)) continue;
          const last = command.events && command.events[command.events.length - 1];
          if (last) keepOutcome({ ...last, correlation_id: command.correlation_id });
        }
        // (the link names the API's path whole; never a token)
        path = result.next && result.next.startsWith(`${API}/`) ? result.next.slice(API.length) : null;
      }
      renderSent();
    }
  }

  // Whether the open event stream brings the events of the command ``entry`` sent.
  function streamed(entry) {
    if (!state.source || state.source.readyState === EventSource.CLOSED) return false;
    if (state.followedRun) return entry.runId === state.followedRun;
    return entry.rootId === state.root;
  }

  function treesOf(runs) {
    const children = new Map();
    const roots = [];
    for (const run of runs.values()) {
      const parent = run.parent_run_id && runs.has(run.parent_run_id) ? run.parent_run_id : null;
      if (parent) {
        if (!children.has(parent)) children.set(parent, []);
        children.get(parent).push(run);
      } else {
        roots.push(run);
      }
    }
    const byAge = (a, b) => String(a.created_at).localeCompare(String(b.created_at));
    for (const list of children.values()) list.sort(byAge);
    roots.sort((a, b) => byAge(b, a)); // newest tree first
    return { roots, children };
  }

  function liveTree(run, children) {
    if (!FINISHED.has(run.status)) return true;
    return (children.get(run.run_id) || []).some((child) => liveTree(child, children));
  }

  // Rows are kept and updated in place (keyed by run id), so a poll neither steals focus nor
  // replaces the element someone is about to click.
  const nodes = new Map(); // run_id -> {item, row, badge, name, meta, pending, ask, group}

  function renderTree() {
    const { roots, children } = treesOf(state.runs);
    const showFinished = $("show-finished").checked;
    // Every live tree and the selected run's tree; finished ones (newest first) fill the rest
    // up to MAX_TREES.
    const keep = new Set(roots.filter((root) => liveTree(root, children)));
    for (const root of roots) if (root.run_id === state.root) keep.add(root);
    for (const root of roots) {
      if (!showFinished || keep.size >= MAX_TREES) break;
      keep.add(root);
    }
    const shown = roots.filter((root) => keep.has(root));
    const box = $("tree");
    const items = [];
    for (const root of shown) placeNode(root, children, 0, items);
    place(box, items);
    // "No runs yet" only when there are none: with finished trees hidden, it was said of a
    // tenant whose runs had all finished
    $("tree-empty").hidden = roots.length > 0;
    const hidden = shown.length ? 0 : roots.length;
    $("tree-hidden").hidden = !hidden;
    if (hidden) {
      // ``roots`` is the pages read so far: with more to read, there are more hidden
      const trees = state.more
        ? `${hidden} or more finished trees`
        : `${hidden} finished tree${hidden === 1 ? "" : "s"}`;
      $("tree-hidden").textContent = `No live runs: ${trees} hidden (tick “show finished trees” to see ${hidden === 1 && !state.more ? "it" : "them"}).`;
    }
    $("tree-more").hidden = !state.more;
    for (const [runId, node] of nodes) if (!node.item.isConnected) nodes.delete(runId);
  }

  function place(parent, items) {
    // What is no longer listed goes first: the rest then close the gap without moving. A
    // row moved (taken out and put back, as insertBefore does) loses the keyboard's focus,
    // and a tree that left from above the focused row sent the next key to the page's top.
    const listed = new Set(items);
    for (const child of [...parent.children]) if (!listed.has(child)) child.remove();
    items.forEach((item, i) => {
      if (parent.children[i] !== item) parent.insertBefore(item, parent.children[i] || null);
    });
  }

  // Runs deeper than this are drawn beside the run at this level, not inside it: a chain of
  // sub-agents a thousand deep, nested as deep, crashed Chromium's tab laying the page out.
  const MAX_NEST = 32;

  // The item of ``run`` (and, below MAX_NEST, of the runs under it) is added to ``out``.
  function placeNode(run, children, depth, out) {
    const node = nodes.get(run.run_id) || newNode(run.run_id);
    const selected = run.run_id === state.selected;
    const row = node.row;
    row.className = `run-row${selected ? " selected" : ""}`;
    row.dataset.rootRunId = run.root_run_id || "";
    row.dataset.status = run.status;
    row.dataset.agent = run.agent_id || "";
    row.dataset.depth = String(depth);
    row.dataset.modelCalls = String((run.counters || run.usage || {}).model_calls ?? "");
    row.setAttribute("aria-pressed", selected ? "true" : "false");
    row.setAttribute("aria-label", `${runName(run)}, ${run.status}, ${counters(run)}`);
    node.badge.textContent = statusText(run);
    node.badge.className = `badge status-${run.status}`;
    node.badge.title = silentNote(run);
    node.name.textContent = runName(run);
    node.meta.textContent = depth > MAX_NEST ? `${counters(run)} · level ${depth}` : counters(run);
    const pending = (run.pending_commands || []).length;
    const questions = questionsOf(run).length;
    node.pending.textContent = `${pending} pending`;
    node.pending.hidden = !pending;
    node.ask.textContent = `${questions} waiting for approval`;
    node.ask.hidden = !questions;
    row.dataset.questions = String(questions);
    const kids = children.get(run.run_id) || [];
    const items = [];
    const below = depth < MAX_NEST ? items : out;
    if (below === out) place(node.group, []);
    out.push(node.item);
    for (const kid of kids) placeNode(kid, children, depth + 1, below);
    if (below === items) place(node.group, items);
    node.group.hidden = items.length === 0;
  }

  function newNode(runId) {
    const node = {
      badge: el("span", { class: "badge" }),
      name: el("span", { class: "run-name" }),
      meta: el("span", { class: "run-meta" }),
      pending: el("span", { class: "flag" }),
      ask: el("span", { class: "flag ask" }),
      group: el("ul", { class: "children" }),
    };
    node.row = el(
      "button",
      { type: "button", "data-testid": "run-row", "data-run-id": runId, onclick: () => select(runId) },
      node.badge, node.name, node.meta, node.pending, node.ask,
      el("code", { class: "run-id", text: runId }),
    );
    node.item = el("li", {}, node.row, node.group);
    nodes.set(runId, node);
    return node;
  }

  // ------------------------------------------------------------------ the selected run

  // A run the tree does not show (older than the trees it lists) known by its id (from the
  // CLI, a log, a colleague): read by its id and selected; its tree is followed from then.
  // ``linked``: the id is the page address's (``#run=<id>``): a reload, back or forward, a
  // link; then a run that is not there selects none, and the address is left as it is.
  async function openRun(runId, linked = false) {
    if (!runId) {
      toast("Write a run id first.");
      return;
    }
    const token = state.token;
    const result = await api(runPath(runId));
    if (state.token !== token) return; // signed out (or in with another token) meanwhile
    if (linked && linkedRun() !== runId) return; // the address moved on meanwhile
    const run = result.data;
    if (!result.ok || !run || typeof run !== "object" || typeof run.run_id !== "string") {
      toast(`${linked ? "The run in the address: " : ""}${problem(result)}`);
      if (linked) select(null, true);
      return;
    }
    state.runs.set(run.run_id, run);
    select(run.run_id, linked);
    poll();
  }

  function select(runId, linked = false) {
    if (runId !== state.selected) swapDrafts(state.selected, runId);
    state.selected = runId;
    if (!linked) linkRun(runId);
    const run = state.runs.get(runId);
    if (run) {
      follow(run.root_run_id || run.run_id, run.run_id);
    } else if (!runId) {
      stopFollowing();
      state.lastSeen = 0;
      $("timeline").replaceChildren();
      setConnection("idle");
    }
    renderTree();
    renderDetail();
    applyTimelineFilter();
  }

  // What is written in the fields is kept for the run it was written for, and the fields
  // show what was written for the run selected now (nothing, most often).
  function swapDrafts(from, to) {
    const written = {};
    for (const id of DRAFT_FIELDS) if ($(id).value) written[id] = $(id).value;
    if (from && Object.keys(written).length) state.drafts.set(from, written);
    else if (from) state.drafts.delete(from);
    const kept = (to && state.drafts.get(to)) || {};
    state.drafts.delete(to);
    for (const id of DRAFT_FIELDS) $(id).value = kept[id] || "";
    sizeSteer();
  }

  // The selected run is the page address's fragment, ``#run=<id>`` (a fragment never reaches
  // the server, nor its logs): percent-encoded by URLSearchParams, whatever the id holds
  // (``#``, ``&``, ``+``, quotes, any script), and read back the same way. The id is only
  // ever shown with textContent and sent in a path with encodeURIComponent.
  function linkedRun() {
    return new URLSearchParams(window.location.hash.replace(/^#/, "")).get("run") || null;
  }

  function linkRun(runId) {
    if (linkedRun() === runId) return;
    const url = new URL(window.location.href);
    const hash = new URLSearchParams(url.hash.replace(/^#/, ""));
    if (runId) hash.set("run", runId);
    else hash.delete("run");
    const rest = hash.toString();
    // one history entry per run picked: back and forward go through them
    window.history.pushState(null, "", url.pathname + url.search + (rest ? `#${rest}` : ""));
  }

  // The address names another run than the one selected (loaded, back or forward, a link
  // pasted in this tab): that run is selected, read by its id when the tree lacks it.
  function showLinkedRun() {
    if (!state.token && !state.open) return;
    const runId = linkedRun();
    if (runId === state.selected) return;
    if (!runId) select(null, true);
    else if (state.runs.has(runId)) select(runId, true);
    else openRun(runId, true);
  }

  // A run whose process died stays in its last status: the server marks it owner_silent.
  function statusText(run) {
    return run.owner_silent ? `${run.status} (owner silent)` : run.status;
  }

  function silentNote(run) {
    return run.owner_silent
      ? `No heartbeat from its runtime (${iso(run.owner || "?")}) since ${iso(run.updated_at || "?")}: its process is likely gone, and commands to it are refused; Cancel declares it dead (the commands it had accepted fail).`
      : "";
  }

  function renderDetail() {
    const run = state.runs.get(state.selected);
    $("detail-body").hidden = !run;
    $("detail-empty").hidden = Boolean(run);
    if (!run) {
      $("detail-title").textContent = state.selected ? "That run is gone from the list" : "No run selected";
      return;
    }
    $("detail-title").textContent = runName(run);
    const status = $("run-status");
    status.textContent = statusText(run);
    status.className = `badge status-${run.status}`;
    status.title = silentNote(run);
    $("run-id").textContent = run.run_id;
    // a graph task's own entry (gt-...) hangs under its graph run: it is a task of it, not a
    // run that run started
    const task = run.kind === "graph" && run.task_id && run.parent_run_id;
    const where = task
      ? `, of graph run ${nameOf(run.parent_run_id)}`
      : run.parent_run_id ? `, started by ${nameOf(run.parent_run_id)}` : ", a top-level run";
    const what = task ? "graph task" : `${iso(run.kind || "agent")} run`;
    $("run-kind").textContent = `${what}, tenant ${iso(run.tenant_id || "?")}${where}`;
    $("run-counters").textContent = counters(run);
    $("run-tools").textContent = Array.isArray(run.tools) ? run.tools.map(iso).join(", ") || "none" : "whatever its agent defines";
    const finished = FINISHED.has(run.status);
    // what the run can be sent: its snapshot's "accepts" when it has one (a graph run, or a
    // function node's task, which the graph run refuses the rest for), else every kind
    const accepts = Array.isArray(run.accepts) ? new Set(run.accepts) : null;
    const refused = [];
    const focused = document.activeElement;
    for (const [id, control] of CONTROLS) {
      const takes = !accepts || control.kinds.every((kind) => accepts.has(kind));
      if (!takes) refused.push(control.label);
      for (const part of [id, ...(control.fields || [])]) $(part).disabled = finished || !takes;
      $(id).title = finished
        ? "This run has finished: it takes no more commands."
        : takes ? "" : refusedNote(run, control.label);
    }
    // a control disabled under the keyboard's focus drops it to the page's start: it goes to
    // the run's heading instead, and Tab goes on from the run's panel
    if (focused && focused !== document.body && focused.disabled) $("detail-title").focus();
    const note = !finished && refused.length ? refusedNote(run, refused.join(", ")) : "";
    $("control-note").textContent = note;
    $("control-note").hidden = !note;
    renderInterrupts(run);
    renderPending(run);
  }

  // Each control and the steering kinds it sends (its form's fields are disabled with it).
  const CONTROLS = [
    ["pause-btn", { kinds: ["pause"], label: "pause" }],
    ["resume-btn", { kinds: ["resume"], label: "resume" }],
    ["cancel-btn", { kinds: ["cancel"], label: "cancel" }],
    ["steer-btn", { kinds: ["add_instruction"], label: "steer", fields: ["steer-input"] }],
    ["tools-btn", { kinds: ["constrain_tools"], label: "narrow tools", fields: ["tools-input"] }],
  ];

  function refusedNote(run, what) {
    const takes = (run.accepts || []).map(iso).join(", ");
    if (run.kind === "graph" && !run.task_id) {
      return `Not for this graph run: it refuses ${what} for itself (only an agent node's run takes it, while the node runs), and takes only ${takes}.`;
    }
    const node = run.node_id ? `node ${iso(run.node_id)}` : "this run";
    return `Not for ${node}: its graph run refuses ${what} for it, and takes only ${takes}.`;
  }

  function questionsOf(run) {
    // A graph run lists its tasks' questions; a task's own row shows the ones that are its.
    if (run.interrupts && run.interrupts.length) return run.interrupts;
    const graph = run.task_id ? state.runs.get(run.parent_run_id) : null;
    return graph ? (graph.interrupts || []).filter((ask) => ask.task_id === run.task_id) : [];
  }

  function unchanged(box, value) {
    // Lists redrawn only when what they show changed: a poll never swaps the button under
    // the pointer (or under a screen reader's cursor).
    const sig = JSON.stringify(value);
    if (box.dataset.sig === sig) return true;
    box.dataset.sig = sig;
    return false;
  }

  function renderInterrupts(run) {
    const list = questionsOf(run);
    $("interrupts-box").hidden = list.length === 0;
    if (unchanged($("interrupts"), [run.run_id, list])) return;
    $("interrupts").replaceChildren(...list.map((ask) => {
      const value = questionText(ask.value);
      const label = `${iso(ask.node || "task")}: ${iso(value)}`;
      // the answer's value, optional: JSON (a number, an object) or plain text
      const field = el("input", {
        type: "text", class: "answer", "data-testid": "answer-value",
        "aria-label": `Answer value: ${label}`, placeholder: valueHint(ask.response_schema),
      });
      // a form: Enter in the field approves, as its first button (the form's submit)
      const form = el("form", {
        class: "answer-form",
        onsubmit: (event) => {
          event.preventDefault();
          answer(run, ask, "approve", field);
        },
      });
      form.append(
        el("span", { class: "question", text: label }),
        ask.response_schema
          ? el("span", { class: "hint", "data-testid": "answer-schema", text: `expects ${schemaText(ask.response_schema)}` })
          : null,
        field,
        el("button", { type: "submit", "data-testid": "approve-btn", "aria-label": `Approve: ${label}` }, "Approve"),
        el("button", {
          type: "button", class: "danger", "data-testid": "reject-btn", "aria-label": `Reject: ${label}`,
          onclick: () => answer(run, ask, "reject", field),
        }, "Reject"),
      );
      return el("li", { "data-testid": "interrupt", "data-interrupt-id": ask.id }, form);
    }));
  }

  function schemaText(schema) {
    // An object schema's fields, "{approved: boolean, value?: string}"; any other as its type.
    const props = schema && typeof schema === "object" ? schema.properties : null;
    if (!props || typeof props !== "object") return (schema && iso(schema.type)) || "an answer (see its JSON Schema)";
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(props).map(([name, spec]) => {
      const type = spec && (spec.type || (spec.anyOf || []).map((s) => s.type).filter(Boolean).join(" | "));
      return `${iso(name)}${required.has(name) ? "" : "?"}: ${iso(type || "any")}`;
    });
    return `{${fields.join(", ")}}`;
  }

  function valueHint(schema) {
    const spec = schema && schema.properties && schema.properties.value;
    const said = spec && (spec.description || spec.title);
    return said ? `value: ${iso(said)}` : "value (optional)";
  }

  function answerValue(field, schema) {
    // What the field holds, as the answer's "value": JSON when it reads as JSON, else text;
    // but a number, true, false or null is the text as typed where the question's schema
    // says its value is a string ("50.00" read as JSON was the number 50, which such a schema
    // refuses). An array or object typed there is sent as the JSON it is.
    const text = field ? field.value.trim() : "";
    if (!text) return undefined;
    let value;
    try {
      value = JSON.parse(text);
    } catch (_) {
      return text;
    }
    const spec = schema && schema.properties && schema.properties.value;
    const scalar = value === null || typeof value !== "object";
    return spec && spec.type === "string" && scalar && typeof value !== "string" ? text : value;
  }

  function questionText(value) {
    // {"question": "..."} (or any one-string object) reads as its sentence; the rest as JSON.
    if (typeof value === "string") return value;
    const strings = value && typeof value === "object" ? Object.values(value).filter((v) => typeof v === "string") : [];
    if (strings.length === 1 && Object.keys(value).length === 1) return strings[0];
    return JSON.stringify(value);
  }

  function renderPending(run) {
    const list = run.pending_commands || [];
    $("pending-box").hidden = list.length === 0;
    if (unchanged($("pending"), list)) return;
    $("pending").replaceChildren(...list.map((cmd) => {
      const actor = cmd.actor && typeof cmd.actor === "object"
        ? cmd.actor.user_id || cmd.actor.name || cmd.actor.type : cmd.actor;
      return el("li", { "data-testid": "pending-command" },
        `${iso(cmd.kind)} — ${iso(cmd.state)}${actor ? ` (from ${iso(actor)})` : ""} `,
        el("code", { text: short(cmd.correlation_id) }));
    }));
  }

  // ------------------------------------------------------------------ commands

  async function send(label, runId, path, body) {
    const run = state.runs.get(runId);
    const rootId = run ? run.root_run_id || run.run_id : runId;
    const entry = { label, runId, rootId, receipt: "sending…", correlationId: null, error: null };
    entry.session = state.session;
    state.sent.unshift(entry);
    state.sent.length = Math.min(state.sent.length, 50);
    renderSent();
    const result = await api(path, { method: "POST", body });
    // a target that is not there (a question answered meanwhile) is a 404 with its receipt
    const receipt = result.data && (result.ok ? result.data : result.data.receipt);
    if (receipt && receipt.status) {
      entry.receipt = receipt.status;
      entry.reason = receipt.reason || null;
      entry.correlationId = receipt.correlation_id;
    } else if (result.status === 504 && result.data && result.data.correlation_id) {
      // the run's owner (another process) did not answer in time: the command may still be
      // applied, and its outcome is followed by its correlation id
      entry.receipt = "no answer";
      entry.correlationId = result.data.correlation_id;
    } else {
      entry.receipt = "not sent";
      entry.error = problem(result);
      // (signed out meanwhile, by a 401 or a click: the label holds what was written)
      if (entry.session === state.session) toast(`${label}: ${entry.error}`);
    }
    renderSent();
    setTimeout(poll, 150);
    return entry;
  }

  function outcome(entry) {
    if (entry.error) return { text: entry.error, terminal: true, type: "error" };
    if (entry.receipt === "rejected") {
      return { text: `rejected: ${entry.reason ? iso(entry.reason) : "no reason given"}`, terminal: true, type: "steering.rejected" };
    }
    if (entry.receipt === "duplicate") return { text: "already sent once (duplicate)", terminal: true, type: "duplicate" };
    const event = entry.correlationId ? state.outcomes.get(entry.correlationId) : null;
    if (!event && entry.receipt === "no answer") {
      return { text: "its run's owner did not answer in time: it may still be applied", terminal: false, type: "" };
    }
    if (!event) return { text: entry.correlationId ? "waiting for the run" : "", terminal: false, type: "" };
    const said = OUTCOME_TEXT[event.type] || event.type;
    // "superseded by c-...": the reason already says what happened
    const text = event.reason && event.reason.startsWith(said) ? iso(event.reason)
      : `${said}${event.reason ? `: ${iso(event.reason)}` : ""}`;
    return { text, terminal: TERMINAL.has(event.type), type: event.type };
  }

  // What is kept of a command sent, for a reload: its row's words and its last known step.
  function keepSent() {
    const kept = state.sent.map((entry) => {
      const event = entry.correlationId ? state.outcomes.get(entry.correlationId) : null;
      return {
        label: entry.label, runId: entry.runId, rootId: entry.rootId, receipt: entry.receipt,
        reason: entry.reason || null, correlationId: entry.correlationId, error: entry.error,
        outcome: event ? { type: event.type, reason: event.reason || null } : null,
      };
    });
    try {
      if (kept.length) sessionStorage.setItem(SENT_KEY, JSON.stringify(kept));
      else sessionStorage.removeItem(SENT_KEY);
    } catch (_) {
      // storage full or refused: the list is then not kept across a reload
    }
  }

  // After a reload: the commands this tab sent before it, their outcomes followed again.
  function restoreSent() {
    let kept;
    try {
      kept = JSON.parse(sessionStorage.getItem(SENT_KEY) || "[]");
    } catch (_) {
      return;
    }
    if (!Array.isArray(kept)) return;
    const text = (value) => (typeof value === "string" ? value : null);
    for (const saved of kept.slice(0, 50)) {
      if (!saved || typeof saved !== "object" || !text(saved.label) || !text(saved.runId)) continue;
      const entry = {
        label: saved.label, runId: saved.runId, rootId: text(saved.rootId) || saved.runId,
        receipt: text(saved.receipt) || "not sent", reason: text(saved.reason),
        correlationId: text(saved.correlationId), error: text(saved.error),
      };
      // sent, but the page went before its receipt came: its fate is in the run's history
      if (entry.receipt === "sending…") {
        entry.receipt = "unknown";
        entry.error = "the page was reloaded before its receipt came: see the run's command history";
      }
      state.sent.push(entry);
      const last = saved.outcome;
      if (entry.correlationId && last && typeof last === "object" && text(last.type)) {
        keepOutcome({ type: last.type, reason: text(last.reason), correlation_id: entry.correlationId });
      }
    }
    renderSent();
  }

  function renderSent() {
    keepSent();
    // One row per command, kept and updated in place as its outcome changes.
    place($("sent"), state.sent.map((entry) => {
      if (!entry.row) {
        entry.cells = [el("td"), el("td"), el("td"), el("td", { "data-testid": "outcome" })];
        entry.badge = el("span", { "data-testid": "receipt" });
        entry.cells[2].append(entry.badge);
        entry.row = el("tr", { "data-testid": "sent-command" }, ...entry.cells);
      }
      const end = outcome(entry);
      entry.row.dataset.correlationId = entry.correlationId || "";
      entry.row.dataset.outcome = end.type;
      entry.cells[0].textContent = entry.label;
      entry.cells[1].textContent = nameOf(entry.runId);
      entry.badge.className = `badge receipt-${entry.receipt.replace(/ /g, "-")}`;
      entry.badge.textContent = entry.receipt;
      entry.cells[3].textContent = end.text;
      entry.cells[3].className = end.terminal ? "terminal" : "";
      return entry.row;
    }));
  }

  function runPath(runId) {
    return `/runs/${encodeURIComponent(runId)}`;
  }

  function answer(run, ask, kind, field) {
    // An interrupt belongs to a graph task: the command goes to that task of its graph run,
    // through the row it was asked from (a task's own row: its entry, which the server sends
    // on to its graph run; a token narrowed to the entry may not see the graph run).
    const taskId = ask.task_id || run.task_id;
    const path = taskId
      ? `${runPath(run.run_id)}/tasks/${encodeURIComponent(taskId)}/commands`
      : `${runPath(run.run_id)}/commands`;
    const payload = ask.id ? { interrupt_id: ask.id } : {};
    const value = answerValue(field, ask.response_schema);
    if (value !== undefined) payload.value = value;
    send(`${kind} ${iso(ask.node || "question")}`, run.run_id, path, { kind, payload });
  }

  // Says (beside the instruction's field) when what is written is past the server's bound,
  // by how much; the sentence, or "" when it fits.
  function sizeSteer() {
    const field = $("steer-input");
    const bytes = new TextEncoder().encode(JSON.stringify({ text: field.value })).length;
    const tooLong = bytes > MAX_PAYLOAD_BYTES
      ? `Too long to send: ${bytes.toLocaleString("en")} bytes with its JSON (UTF-8), the server takes ${MAX_PAYLOAD_BYTES.toLocaleString("en")}: shorten it by ${(bytes - MAX_PAYLOAD_BYTES).toLocaleString("en")}.`
      : "";
    $("steer-size").hidden = !tooLong;
    $("steer-size").textContent = tooLong;
    if (tooLong) field.setAttribute("aria-invalid", "true");
    else field.removeAttribute("aria-invalid");
    return tooLong;
  }

  function wireControls() {
    $("pause-btn").addEventListener("click", () => {
      if (state.selected) send("pause", state.selected, `${runPath(state.selected)}/pause`, {});
    });
    $("resume-btn").addEventListener("click", () => {
      if (state.selected) send("resume", state.selected, `${runPath(state.selected)}/resume`, {});
    });
    $("cancel-btn").addEventListener("click", () => {
      if (!state.selected) return;
      if (!window.confirm(`Cancel ${nameOf(state.selected)}? A cancelled run does not come back.`)) return;
      // at once: a model call in flight is interrupted (a run waiting on a slow model went
      // on until it answered); a running tool call still finishes
      send("cancel", state.selected, `${runPath(state.selected)}/abort`, { delivery: "immediate" });
    });
    $("steer-input").addEventListener("input", sizeSteer);
    $("steer-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const text = $("steer-input").value;
      if (!state.selected) return;
      if (!text.trim()) {
        toast("Write an instruction first.");
        return;
      }
      // measured as the server measures it: a field bounded in characters cut English
      // short of the limit and let accented text past it, to be refused
      const tooLong = sizeSteer();
      if (tooLong) {
        toast(tooLong);
        return;
      }
      const field = $("steer-input");
      field.value = "";
      sizeSteer();
      send(`steer: “${iso(clip(text.trim(), 60))}”`, state.selected, `${runPath(state.selected)}/steer`, { message: text })
        .then((entry) => {
          // it did not reach the server, or was refused (too large, say): it changed nothing,
          // and the text written is not lost with it (to be shortened, sent again)
          const refused = entry.error || entry.receipt === "rejected";
          // signed out meanwhile (a 401 signs out too): the text went with the session, and
          // is not handed to the next one (another tenant's, maybe)
          if (!refused || entry.session !== state.session) return;
          if (state.selected === entry.runId) {
            if (!field.value) field.value = text;
            sizeSteer();
          } else {
            // another run was picked meanwhile: the text goes back to its own run's draft
            const draft = state.drafts.get(entry.runId) || {};
            if (!draft["steer-input"]) state.drafts.set(entry.runId, { ...draft, "steer-input": text });
          }
        });
    });
    $("tools-form").addEventListener("submit", (event) => {
      event.preventDefault();
      if (!state.selected) return;
      const tools = $("tools-input").value.split(",").map((name) => name.trim()).filter(Boolean);
      // narrowing is for good: an empty list takes every tool away, so it is asked first
      if (!tools.length && !window.confirm(`Take every tool away from ${nameOf(state.selected)}? Tools narrowed away do not come back.`)) return;
      send(`narrow tools to ${tools.map(iso).join(", ") || "none"}`, state.selected, `${runPath(state.selected)}/commands`,
        { kind: "constrain_tools", payload: { tools } });
    });
    $("open-run-form").addEventListener("submit", (event) => {
      event.preventDefault();
      openRun($("open-run-input").value.trim());
    });
    $("show-finished").addEventListener("change", renderTree);
    $("only-selected").addEventListener("change", applyTimelineFilter);
    $("sign-out").addEventListener("click", () => signIn("Token forgotten."));
    $("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      // the line `tinyagents serve` prints, "Authorization: Bearer <token>", pasted whole
      const token = $("token-input").value.trim().replace(/^(authorization:\s*)?bearer\s+/i, "");
      $("token-input").value = "";
      if (!token) return;
      sessionStorage.removeItem(SENT_KEY); // (another sign-in: another tenant's, maybe)
      sessionStorage.setItem(TOKEN_KEY, token);
      start(token);
    });
  }

  // ------------------------------------------------------------------ the timeline (SSE)

  function setConnection(mode, detail) {
    const pill = $("connection");
    pill.textContent = {
      idle: "pick a run to follow its events", live: "live", connecting: "connecting…",
      offline: "offline", error: "error",
    }[mode] || mode;
    pill.className = `pill conn-${mode}`;
    pill.title = detail || "";
  }

  function stopFollowing() {
    if (state.source) state.source.close();
    state.source = null;
    state.root = null;
    state.followedRun = null; // set when the root was refused: the one run followed instead
    state.streamed = null; // the query of the stream followed once it has opened
  }

  // The server answers again (a poll went through). A stream the browser closed for good
  // (its reconnect got an error status: a proxy's 502 while the server restarted) is opened
  // again after the last event shown; otherwise the pill says what the stream is doing.
  function resumeStream() {
    const source = state.source;
    if (source && source.readyState === EventSource.CLOSED && (state.streamed || source.unsent)) {
      if (document.hidden) return; // a tab in the background holds no stream (``asleep``)
      // at most every few seconds: the stream alone may keep failing while the polls pass
      if (Date.now() - (state.reopenedAt || 0) < REOPEN_MS) return;
      state.reopenedAt = Date.now();
      if (!state.streamed) {
        listen(source.unsent, source.fallbackRunId); // its ticket was refused: ask again
        return;
      }
      const query = { ...state.streamed };
      if (state.lastSeen) query.last_event_id = String(state.lastSeen);
      listen(query, null);
    } else if (!source) {
      if ($("connection").classList.contains("conn-error")) setConnection("idle");
    } else {
      const mode = { [EventSource.OPEN]: "live", [EventSource.CONNECTING]: "connecting" };
      setConnection(mode[source.readyState] || "offline");
    }
  }

  // The selected run's events: its whole tree (by its root), or, when the token may not see
  // the root (a token narrowed to a subtree: the server answers 404), the run's own.
  function follow(rootId, runId) {
    if (state.source && state.root === rootId) {
      if (!state.followedRun || !runId || state.followedRun === runId) return;
      // the root is not ours to see: another run of the tree is followed by its own events
      state.source.close();
      state.lastSeen = 0;
      $("timeline").replaceChildren();
      state.followedRun = runId;
      state.streamed = null;
      listen({ run_id: runId }, null);
      return;
    }
    stopFollowing();
    state.root = rootId;
    state.lastSeen = 0;
    $("timeline").replaceChildren();
    listen({ root_run_id: rootId }, runId && runId !== rootId ? runId : null);
  }

  // The token never goes in the stream's URL (access logs keep URLs): a ticket does, asked
  // for with the token in the header, which opens this stream once. The browser's own
  // reconnect, sending the used ticket again, is refused; the stream is then opened again
  // with a new ticket after the last event shown (``resumeStream``, on the next poll).
  async function listen(params, fallbackRunId) {
    const query = new URLSearchParams(params);
    const placeholder = {
      readyState: EventSource.CONNECTING,
      close() { this.readyState = EventSource.CLOSED; },
    };
    state.source = placeholder;
    setConnection("connecting");
    if (state.token) {
      const { last_event_id: _, ...stream } = params;
      const answer = await api("/events/tickets", { method: "POST", body: stream });
      if (state.source !== placeholder) return; // followed something else meanwhile
      if (answer.status === 404 && fallbackRunId) {
        state.followedRun = fallbackRunId;
        listen({ run_id: fallbackRunId }, null); // the root is not ours to see
        return;
      }
      if (!answer.ok || !answer.data || typeof answer.data.ticket !== "string") {
        placeholder.readyState = EventSource.CLOSED;
        placeholder.unsent = params; // asked for again on a later poll (``resumeStream``)
        placeholder.fallbackRunId = fallbackRunId;
        setConnection("offline", problem(answer));
        return;
      }
      query.set("ticket", answer.data.ticket);
    }
    const source = new EventSource(`${API}/events?${query}`);
    state.source = source;
    let opened = false;
    for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
    source.addEventListener("stream", (message) => onOpening(source, params, message));
    source.onmessage = onEvent;
    source.params = params;
    source.onopen = () => {
      opened = true;
      if (state.source !== source) return;
      const { last_event_id: _, ...followed } = params;
      state.streamed = followed;
      setConnection("live");
      if (document.hidden) asleep(); // it opened after its tab went to the background
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED && !opened && fallbackRunId && state.source === source) {
        state.followedRun = fallbackRunId;
        listen({ run_id: fallbackRunId }, null); // refused outright: the root is not ours to see
        return;
      }
      // EventSource reconnects by itself, sending Last-Event-ID; say so meanwhile.
      setConnection(source.readyState === EventSource.CLOSED ? "offline" : "connecting");
      if (source.readyState === EventSource.CLOSED) setTimeout(poll, 0);
    };
  }

  // A browser opens at most six HTTP/1.1 connections to one server, and each tab following
  // a run held one for its stream: with six such tabs, a seventh did not load and the others'
  // polls and commands waited. A tab in the background closes its stream; back in front, it
  // opens it again after the last event shown (``resumeStream``, on the poll it asks for).
  function asleep() {
    const source = state.source;
    if (!(source instanceof EventSource) || source.readyState === EventSource.CLOSED) return;
    source.close();
    if (!state.streamed) source.unsent = source.params; // it had not opened yet
    setConnection("offline", "this tab is in the background");
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      asleep();
    } else {
      state.reopenedAt = 0; // (no wait: the stream was closed on purpose)
      setTimeout(poll, 0);
    }
  });

  // A stream's first message: which log its ids count in, and the id it resumes after. After
  // a restart without a store the ids count from 1 again: what the timeline shows of the old
  // log goes, or each new event (its id at or below the last one shown) would be dropped as
  // a replay. A stream that resumed after an id of the old log is opened again from the start.
  function onOpening(source, params, message) {
    if (state.source !== source) return;
    let said;
    try {
      said = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    if (!said || typeof said !== "object") return;
    const log = typeof said.log === "string" ? said.log : null;
    const after = Number(said.after);
    const another = log !== null && state.log !== null && log !== state.log;
    if (log !== null) state.log = log;
    // (the same log: the server starts over when the id sent is none it gave)
    if (!another && !(Number.isSafeInteger(after) && after < state.lastSeen)) return;
    state.lastSeen = 0;
    $("timeline").replaceChildren();
    if (another && after > 0) {
      source.close();
      const { last_event_id: _, ...query } = params;
      listen(query, null);
    }
  }

  function onEvent(message) {
    const id = Number(message.lastEventId);
    if (message.lastEventId && Number.isSafeInteger(id)) {
      if (id <= state.lastSeen) return; // replayed after a reconnect: shown already
      state.lastSeen = id;
    }
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    if (!event || typeof event !== "object") return;
    event.type = event.type || message.type;
    if (String(event.type).startsWith("steering.") && event.correlation_id) {
      keepOutcome(event);
      renderSent();
    }
    addToTimeline(event, message.lastEventId);
    if (/^(run|subagent|graph)\./.test(event.type) || TERMINAL.has(event.type)) setTimeout(poll, 100);
  }

  function keepOutcome(event) {
    const before = state.outcomes.get(event.correlation_id);
    if (before && TERMINAL.has(before.type)) return;
    state.outcomes.set(event.correlation_id, event);
    if (state.outcomes.size <= MAX_OUTCOMES + state.sent.length) return;
    // the oldest first (a Map keeps insertion order), sparing the commands this page sent
    const mine = new Set(state.sent.map((entry) => entry.correlationId));
    for (const id of state.outcomes.keys()) {
      if (state.outcomes.size <= MAX_OUTCOMES) break;
      if (!mine.has(id)) state.outcomes.delete(id);
    }
  }

  function summary(e) {
    const parts = [];
    // (``written``: a piece the page put together, its run text isolated already)
    const put = (value, written = false) => {
      if (value !== undefined && value !== null && value !== "") parts.push(written ? String(value) : iso(value));
    };
    if (e.type.startsWith("steering.")) {
      const actor = e.actor || {};
      put(e.kind);
      const text = e.payload_summary && (e.payload_summary.text || e.payload_summary.tools);
      if (text) put(`“${Array.isArray(text) ? text.map(iso).join(", ") : iso(text)}”`, true);
      const sender = actor.user_id || actor.name || actor.type;
      put(sender ? `from ${iso(sender)}` : "", true);
      put(e.boundary ? `at ${iso(e.boundary)}` : "", true);
      put(e.reason);
    } else if (e.type.startsWith("run.")) {
      put(e.status);
      put(e.error);
      put(e.output_summary);
    } else if (e.type.startsWith("model.")) {
      put(e.model);
      if (e.tool_calls && e.tool_calls.length) put(`calls ${e.tool_calls.map(iso).join(", ")}`, true);
      put(e.text_summary);
      put(e.text);
      put(e.error);
    } else if (e.type.startsWith("tool.")) {
      put(e.name);
      if (e.args_summary && Object.keys(e.args_summary).length) put(JSON.stringify(e.args_summary));
      put(e.content_summary);
    } else if (e.type.startsWith("subagent.")) {
      put(e.agent_id);
      put(e.status);
      put(e.child_run_id);
    } else if (e.type.startsWith("graph.")) {
      put(e.node);
      put(e.task_id);
      if (e.data && Object.keys(e.data).length) put(JSON.stringify(e.data));
    } else if (e.type.startsWith("limit.")) {
      put(`${iso(e.limit)}: ${iso(e.used)} of ${iso(e.allowed)}`, true);
    } else {
      put(e.rule);
      put(e.action);
    }
    const text = parts.join(" · ");
    return clip(text, 300);
  }

  function addToTimeline(event, id) {
    const list = $("timeline");
    const family = String(event.type).split(".")[0];
    const item = el(
      "li",
      {
        class: `ev ev-${family}${TERMINAL.has(event.type) ? " ev-terminal" : ""}`,
        "data-testid": "timeline-event",
        "data-type": event.type,
        "data-run-id": event.run_id || "",
        "data-correlation-id": event.correlation_id || "",
        "data-event-id": id || "",
      },
      el("time", { datetime: event.at || "", text: when(event.at) }),
      el("span", { class: "ev-type", text: event.type }),
      el("span", { class: "ev-run", text: nameOf(event.run_id) }),
      el("span", { class: "ev-text", text: summary(event) }),
    );
    hideIfFiltered(item);
    list.prepend(item);
    while (list.childElementCount > MAX_EVENTS) list.lastElementChild.remove();
  }

  function hideIfFiltered(item) {
    item.hidden = $("only-selected").checked && item.dataset.runId !== state.selected;
  }

  function applyTimelineFilter() {
    for (const item of $("timeline").children) hideIfFiltered(item);
  }

  // ------------------------------------------------------------------ start

  // What the page holds, for tests and for a look from the browser's devtools.
  window.tinyagentsConsole = Object.freeze({
    memory: () => ({
      last_event_id: state.lastSeen,
      outcomes: state.outcomes.size,
      sent: state.sent.length,
      timeline: $("timeline").childElementCount,
    }),
  });

  document.addEventListener("DOMContentLoaded", () => {
    wireControls();
    const token = takeToken();
    restoreSent();
    window.addEventListener("popstate", showLinkedRun);
    window.addEventListener("hashchange", showLinkedRun);
    if (token) start(token);
    else startWithoutToken();
    setInterval(poll, POLL_MS);
  });
})();
