// a2a-grpc console: plain JavaScript, no library, no build step.
// The back end (cli/console/api.py) does every A2A call through the client library; this page
// only asks it over HTTP JSON and reads streams with EventSource (Server-Sent Events).
"use strict";

const TOKEN = document.querySelector('meta[name="console-token"]').content;
const $ = (id) => document.getElementById(id);

// --- helpers -----------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function clear(node, ...children) { node.replaceChildren(...children.flat().filter(Boolean)); }

async function api(method, path, body) {
  const options = { method, headers: { "X-Console-Token": TOKEN } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    return { ok: false, json: { error: { category: "console", error: "NetworkError",
      message: `the console's back end did not answer: ${error}` } } };
  }
  let json;
  try { json = await response.json(); } catch (error) {
    json = { error: { category: "console", error: "BadResponse",
      message: `HTTP ${response.status} without JSON` } };
  }
  return { ok: response.ok, json };
}

function stateBadge(state) {
  return state ? el("span", { class: `badge state-${state}`, "data-state": state }, state) : null;
}

// An error as the client classified it: its class, A2A reason, code, retryable or not.
function errorBox(error) {
  const retry = error.retryable ? "retryable: trying again may help" : "not retryable";
  const what = [error.error, error.reason && `reason ${error.reason}`, error.code && `(${error.code})`]
    .filter(Boolean).join(" ");
  const fields = (error.fieldViolations || []).map((v) => el("li", {}, el("code", {}, v.field), ": ", v.description));
  return el("div", { class: "error", "data-category": error.category || "", "data-error": error.error || "" },
    el("div", { class: "what" }, what),
    el("div", {}, error.message || ""),
    el("div", { class: "muted" }, `${error.category || "error"} · ${retry}`),
    fields.length ? el("ul", {}, fields) : null);
}

function rawView(label, value) {
  return el("details", { class: "raw" }, el("summary", {}, label),
    el("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2)));
}

// --- safe Markdown: the text is escaped first; only a small subset becomes markup ---------------

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function inlineMarkdown(escaped) {
  return escaped
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/\*([^*]+)\*/g, "<em>$1</em>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" rel="noopener noreferrer" target="_blank">$1</a>');
}

function markdown(text) {
  const out = [];
  let list = false, code = false;
  for (const line of escapeHtml(text).split("\n")) {
    if (line.startsWith("```")) {
      if (list) { out.push("</ul>"); list = false; }
      out.push(code ? "</pre>" : "<pre>"); code = !code; continue;
    }
    if (code) { out.push(line + "\n"); continue; }
    const item = line.match(/^\s*[-*] (.*)$/);
    if (item) { if (!list) { out.push("<ul>"); list = true; } out.push(`<li>${inlineMarkdown(item[1])}</li>`); continue; }
    if (list) { out.push("</ul>"); list = false; }
    const heading = line.match(/^(#{1,3}) (.*)$/);
    if (heading) { const n = heading[1].length; out.push(`<h${n}>${inlineMarkdown(heading[2])}</h${n}>`); continue; }
    if (line.trim()) out.push(`<p>${inlineMarkdown(line)}</p>`);
  }
  if (list) out.push("</ul>");
  if (code) out.push("</pre>");
  const node = el("div", { class: "md" });
  node.innerHTML = out.join("");  // built from escaped text only
  return node;
}

// --- parts, artifacts, messages, tasks --------------------------------------------------------

function bytesOf(b64) { return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)); }

function prettyJson(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (error) { return text; }
}

function partView(part) {
  const type = part.mediaType || "";
  const box = el("div", { class: "part", "data-kind": part.kind, "data-media-type": type });
  if (part.kind === "text") {
    box.append(type === "text/markdown" ? markdown(part.text) : el("div", { class: "text" }, part.text));
  } else if (part.kind === "data") {
    box.append(el("pre", { class: "json" }, JSON.stringify(part.data, null, 2)));
  } else if (part.kind === "raw") {
    if (part.base64 === undefined) {
      box.append(el("span", { class: "muted" }, `${part.filename || "file"}: ${part.size} bytes (too large to show)`));
    } else if (type === "text/markdown" || type === "text/plain" || type === "application/json") {
      const text = new TextDecoder().decode(bytesOf(part.base64));
      if (type === "text/markdown") box.append(markdown(text));
      else if (type === "application/json") box.append(el("pre", { class: "json" }, prettyJson(text)));
      else box.append(el("div", { class: "text" }, text));
    } else if (type.startsWith("image/")) {
      box.append(el("img", { src: `data:${type};base64,${part.base64}`, alt: part.filename || "image" }));
    } else {
      const url = URL.createObjectURL(new Blob([bytesOf(part.base64)], { type: type || "application/octet-stream" }));
      box.append(el("a", { href: url, download: part.filename || "download", class: "download" },
        `Download ${part.filename || "file"} (${type || "bytes"}, ${part.size} bytes)`));
    }
  } else if (part.kind === "url") {
    const safe = /^https?:\/\//i.test(part.url);
    box.append(safe ? el("a", { href: part.url, rel: "noopener noreferrer", target: "_blank" }, part.url)
      : el("code", {}, part.url), type ? el("span", { class: "muted" }, ` ${type}`) : null);
  }
  return box;
}

function artifactView(artifact) {
  return el("div", { class: `artifact${artifact.complete ? "" : " partial"}`, "data-artifact-id": artifact.artifactId,
      "data-complete": artifact.complete ? "true" : "false" },
    el("div", { class: "muted" }, `artifact ${artifact.name || artifact.artifactId}`,
      artifact.complete ? "" : " (chunks arriving)"),
    artifact.parts.map(partView));
}

function messageView(message, label) {
  return el("div", { class: "box message", "data-role": message.role },
    el("div", { class: "muted" }, label || message.role), message.parts.map(partView));
}

function taskView(task) {
  return el("div", { class: "task", "data-task-id": task.id },
    el("div", {}, "state ", stateBadge(task.state), " · context ", el("code", {}, task.contextId),
      task.timestamp ? el("span", { class: "muted" }, ` · ${task.timestamp}`) : null),
    task.statusMessage ? messageView(task.statusMessage, "agent's status message") : null,
    task.artifacts.length ? el("h3", {}, "Artifacts") : null,
    task.artifacts.map(artifactView),
    task.history && task.history.length ? el("h3", {}, "History") : null,
    (task.history || []).map((m) => messageView(m)));
}

// --- streams: a live timeline ---------------------------------------------------------------------

// Reads one stream of the back end into `container`; resolves with the last item and the end.
function followStream(streamId, container, options) {
  container.dataset.streamId = streamId;
  container.dataset.streamKind = options.kind || "";
  const live = el("div", { class: "live" });
  const rows = el("tbody");
  const ending = el("div", { class: "stream-end" });
  clear(container,
    options.notice ? el("div", { class: "notice" }, options.notice) : null,
    live,
    el("table", { class: "timeline" }, el("thead", {}, el("tr", {}, el("th", {}, "since send"),
      el("th", {}, "kind"), el("th", {}, "state"), el("th", {}, "what"), el("th", {}, "raw"))), rows),
    ending);
  let last = null, snapshotShown = !!options.notice;
  return new Promise((resolve) => {
    const source = new EventSource(`/api/streams/${streamId}`);
    source.addEventListener("item", (message) => {
      const item = JSON.parse(message.data);
      last = item;
      const what = item.kind === "artifact_update"
        ? `${item.artifactId}${item.append ? " +chunk" : ""}${item.lastChunk ? " (last chunk)" : ""}: ${item.text || ""}`
        : item.text || "";
      rows.append(el("tr", { class: "event", "data-kind": item.kind, "data-event-id": item.eventId || "" },
        el("td", { class: "ms" }, `+${item.ms} ms`), el("td", { class: "kind" }, item.kind),
        el("td", {}, stateBadge(item.state)), el("td", {}, what),
        el("td", {}, rawView(options.rawLabel || "wire JSON", item.raw))));
      const view = item.view;
      if (view.resumedFromSnapshot && !snapshotShown) {
        snapshotShown = true;
        container.prepend(el("div", { class: "notice", "data-notice": "snapshot" },
          "Resumed from a snapshot: the server no longer keeps the events after the last id seen, so events in between are not shown one by one."));
      }
      clear(live,
        view.message ? messageView(view.message, "agent's direct answer") : null,
        view.task ? taskView(view.task) : null,
        view.task && view.state === "input-required" && options.onAnswer ? answerForm(view.task, options.onAnswer) : null);
      if (options.onItem) options.onItem(item);
    });
    source.addEventListener("end", (message) => {
      source.close();
      const end = JSON.parse(message.data);
      clear(ending,
        end.outcome === "error" ? errorBox(end.error)
          : el("div", { class: "muted", "data-outcome": end.outcome }, `stream ${end.outcome} after ${end.ms} ms`));
      resolve({ last, end });
    });
  });
}

function answerForm(task, onAnswer) {
  const input = el("input", { class: "answer-text", placeholder: "your answer" });
  return el("form", { class: "inline answer", onsubmit: (event) => {
      event.preventDefault();
      onAnswer(task, input.value);
    } },
    el("label", {}, "The agent asks: answer ", input), el("button", { type: "submit" }, "Answer"));
}

// --- the card page ---------------------------------------------------------------------------------

async function loadCard() {
  clear($("card-status"), "Loading the card and checking each interface…");
  clear($("card-view"));
  const { ok, json } = await api("GET", "/api/card");
  clear($("card-status"));
  if (!ok) { clear($("card-view"), errorBox(json.error)); return; }
  const card = json.card;
  const caps = card.capabilities || {};
  const checks = json.checks.map((c) => el("tr", { class: "check", "data-check": c.name, "data-verdict": c.verdict },
    el("td", {}, c.name), el("td", {}, el("span", { class: `badge ${c.verdict}` }, c.verdict)), el("td", {}, c.detail)));
  const reach = json.reachability.map((r) => el("tr", { class: "interface", "data-verdict": r.verdict },
    el("td", {}, r.interface.protocolBinding), el("td", {}, r.interface.protocolVersion),
    el("td", {}, el("code", {}, r.interface.url)), el("td", {}, r.interface.tenant || ""),
    el("td", {}, el("span", { class: `badge ${r.verdict}` }, r.verdict), " ", r.detail)));
  const skills = (card.skills || []).map((s) => el("li", {}, el("strong", {}, s.name || s.id), " ",
    el("span", { class: "muted" }, (s.tags || []).join(", ")), el("div", {}, s.description || ""),
    (s.examples || []).length ? el("div", { class: "muted" }, "e.g. ", s.examples.join(" · ")) : null));
  const security = [
    ...Object.entries(card.securitySchemes || {}).map(([name, scheme]) => el("li", {}, el("code", {}, name), ": ", JSON.stringify(scheme))),
    ...(card.securityRequirements || []).map((req) => el("li", {}, "requires ", JSON.stringify(req.schemes || req))),
  ];
  clear($("card-view"),
    el("div", { class: "box", id: "card-summary" },
      el("h3", { id: "card-name" }, card.name || "(no name)"),
      el("div", {}, card.description || ""),
      el("div", { class: "muted" }, `version ${card.version || "?"}`,
        card.provider ? ` · ${card.provider.organization || ""}` : "", ` · from ${json.source}`)),
    el("h3", {}, "Checks"), el("table", { id: "card-checks" }, el("tbody", {}, checks)),
    el("h3", {}, "Interfaces and their reachability"),
    el("table", { id: "card-interfaces" }, el("thead", {}, el("tr", {}, ["binding", "version", "url", "tenant", "reachable"].map((h) => el("th", {}, h)))), el("tbody", {}, reach)),
    el("h3", {}, "Capabilities"),
    el("div", { id: "card-capabilities" }, `streaming: ${!!caps.streaming} · push notifications: ${!!caps.pushNotifications} · extended card: ${!!caps.extendedAgentCard}`,
      (caps.extensions || []).length ? el("ul", {}, caps.extensions.map((e) => el("li", {}, el("code", {}, e.uri), e.required ? " (required)" : ""))) : null),
    el("div", { class: "muted" }, `input modes: ${(card.defaultInputModes || []).join(", ")} · output modes: ${(card.defaultOutputModes || []).join(", ")}`),
    el("h3", {}, "Skills"), el("ul", { class: "skills", id: "card-skills" }, skills),
    el("h3", {}, "Security"), security.length ? el("ul", {}, security) : el("div", { class: "muted" }, "none declared"),
    rawView("Raw JSON, as served", json.raw));
}

// --- the send page ---------------------------------------------------------------------------------

function listOf(text) { return text.split(",").map((s) => s.trim()).filter(Boolean); }

function readFile(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function sendBody() {
  const body = {
    text: $("send-text").value,
    data: $("send-data").value.trim(),
    taskId: $("send-task-id").value.trim(),
    contextId: $("send-context-id").value.trim(),
    returnImmediately: $("send-return-immediately").checked,
    historyLength: $("send-history").value,
    acceptedOutputModes: listOf($("send-modes").value),
    extensions: listOf($("send-extensions").value),
    budget: $("send-budget").value.trim(),
    currency: $("send-currency").value.trim(),
  };
  const mediaType = $("send-media-type").value.trim();
  const file = $("send-file").files[0];
  if (file) body.file = { name: file.name, mediaType: mediaType || file.type, base64: await readFile(file) };
  if ($("send-url").value.trim()) body.url = { url: $("send-url").value.trim(), mediaType };
  return body;
}

async function startStream(body, container, options) {
  const { ok, json } = await api("POST", "/api/streams", body);
  if (!ok) { clear(container, errorBox(json.error)); return null; }
  return followStream(json.streamId, container, { ...options, kind: json.kind });
}

async function answer(task, text, container) {
  const body = { text, taskId: task.id, contextId: task.contextId };
  return startStream(body, container, { onAnswer: (t, a) => answer(t, a, container) });
}

async function send(event) {
  event.preventDefault();
  const result = $("send-result");
  clear(result);
  clear($("send-status"), "Sending…");
  const body = await sendBody();
  if ($("send-stream").checked) {
    clear($("send-status"));
    await startStream(body, result, { onAnswer: (task, text) => answer(task, text, result) });
    return;
  }
  const { ok, json } = await api("POST", "/api/send", body);
  clear($("send-status"));
  if (!ok) { clear(result, errorBox(json.error)); return; }
  clear(result,
    json.message ? messageView(json.message, "agent's direct answer") : null,
    json.task ? [el("div", {}, el("a", { href: `#task/${json.task.id}` }, `task ${json.task.id}`)), taskView(json.task)] : null,
    rawView("wire JSON", json.raw));
}

// --- the tasks pages -------------------------------------------------------------------------------

let nextPageToken = "";

async function listTasks(pageToken) {
  const query = new URLSearchParams({ state: $("tasks-state").value, contextId: $("tasks-context").value.trim(),
    pageSize: $("tasks-page-size").value, pageToken: pageToken || "" });
  clear($("tasks-status"), "Listing…");
  const { ok, json } = await api("GET", `/api/tasks?${query}`);
  const body = $("tasks-table").tBodies[0];
  if (!ok) { clear($("tasks-status"), errorBox(json.error)); return; }
  clear($("tasks-status"), `${json.tasks.length} of ${json.totalSize} task(s)`);
  clear(body, json.tasks.map((t) => el("tr", { class: "clickable task-row", "data-task-id": t.id,
      onclick: () => { location.hash = `#task/${t.id}`; } },
    el("td", {}, el("code", {}, t.id)), el("td", {}, stateBadge(t.state)),
    el("td", {}, el("code", {}, t.contextId)), el("td", { class: "muted" }, t.timestamp))));
  nextPageToken = json.nextPageToken;
  $("tasks-next").disabled = !nextPageToken;
}

let current = { id: "", streamId: null, lastEventId: null, task: null };

async function showTask(id) {
  current = { id, streamId: null, lastEventId: null, task: null };
  clear($("task-id"), id);
  clear($("task-live"));
  clear($("task-status"));
  $("task-resume").disabled = true;
  $("task-stop").disabled = true;
  await refreshTask();
  await listPushConfigs();
}

async function refreshTask() {
  const { ok, json } = await api("GET", `/api/tasks/${encodeURIComponent(current.id)}`);
  if (!ok) { clear($("task-view"), errorBox(json.error)); return; }
  current.task = json.task;
  clear($("task-view"), taskView(json.task), rawView("wire JSON", json.raw));
}

async function cancelTask() {
  const { ok, json } = await api("POST", `/api/tasks/${encodeURIComponent(current.id)}/cancel`);
  if (!ok) { clear($("task-status"), errorBox(json.error)); return; }
  clear($("task-status"), el("span", { "data-outcome": "canceled" }, "CancelTask answered: ", stateBadge(json.task.state)));
  current.task = json.task;
  clear($("task-view"), taskView(json.task), rawView("wire JSON", json.raw));
}

async function subscribe(after) {
  const id = current.id;
  let notice = null;
  if (after === undefined) after = null;
  else if (after === null) {
    notice = "Resumed from a snapshot: this server gave no event ids, so the stream starts again from the task as it stands; events in between are not shown one by one.";
  }
  const { ok, json } = await api("POST", "/api/streams", { subscribe: id, after });
  if (!ok) { clear($("task-live"), errorBox(json.error)); return; }
  current.streamId = json.streamId;
  $("task-stop").disabled = false;
  $("task-resume").disabled = true;
  const { last } = await followStream(json.streamId, $("task-live"), {
    notice,
    kind: json.kind,
    onItem: (item) => { if (item.eventId) current.lastEventId = item.eventId; },
    onAnswer: (task, text) => answer(task, text, $("task-live")),
  });
  if (current.id !== id) return;
  $("task-stop").disabled = true;
  $("task-resume").disabled = !(last && !["completed", "failed", "canceled", "rejected"].includes(last.view.state));
}

async function stopStream() {
  if (current.streamId) await api("DELETE", `/api/streams/${current.streamId}`);
}

async function listPushConfigs() {
  const { ok, json } = await api("GET", `/api/tasks/${encodeURIComponent(current.id)}/push-configs`);
  if (!ok) { clear($("push-list")); clear($("push-status"), errorBox(json.error)); return; }
  clear($("push-status"));
  clear($("push-list"), json.configs.map((c) => el("li", { class: "push-config", "data-config-id": c.id },
    el("code", {}, c.id), " → ", c.url, c.token ? el("span", { class: "muted" }, ` token ${c.token}`) : null, " ",
    el("button", { type: "button", onclick: async () => {
      const r = await api("DELETE", `/api/tasks/${encodeURIComponent(current.id)}/push-configs/${encodeURIComponent(c.id)}`);
      if (!r.ok) clear($("push-status"), errorBox(r.json.error)); else listPushConfigs();
    } }, "Delete"))));
}

async function createPushConfig(event) {
  event.preventDefault();
  const body = { url: $("push-url").value.trim(), id: $("push-id").value.trim(), token: $("push-token").value };
  const { ok, json } = await api("POST", `/api/tasks/${encodeURIComponent(current.id)}/push-configs`, body);
  if (!ok) { clear($("push-status"), errorBox(json.error)); return; }
  $("push-token").value = "";
  await listPushConfigs();
}

// --- routing ---------------------------------------------------------------------------------------

let cardLoaded = false;

function route() {
  const hash = location.hash || "#card";
  const [page, arg] = hash.slice(1).split("/", 2);
  for (const section of document.querySelectorAll(".page")) section.classList.remove("active");
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.getAttribute("href") === `#${page}`);
  if (page === "task" && arg) {
    $("page-task").classList.add("active");
    if (decodeURIComponent(arg) !== current.id) showTask(decodeURIComponent(arg));
  } else if (page === "send") {
    $("page-send").classList.add("active");
  } else if (page === "tasks") {
    $("page-tasks").classList.add("active");
    listTasks("");
  } else {
    $("page-card").classList.add("active");
    if (!cardLoaded) { cardLoaded = true; loadCard(); }
  }
}

async function start() {
  const { ok, json } = await api("GET", "/api/session");
  if (ok) $("target").textContent = `${json.target}${json.transport ? ` (${json.transport})` : ""}`;
  $("card-reload").addEventListener("click", loadCard);
  $("send-form").addEventListener("submit", send);
  $("tasks-form").addEventListener("submit", (e) => { e.preventDefault(); listTasks(""); });
  $("tasks-next").addEventListener("click", () => listTasks(nextPageToken));
  $("open-form").addEventListener("submit", (e) => { e.preventDefault(); location.hash = `#task/${$("open-id").value.trim()}`; });
  $("task-refresh").addEventListener("click", refreshTask);
  $("task-cancel").addEventListener("click", cancelTask);
  $("task-subscribe").addEventListener("click", () => subscribe(undefined));
  $("task-resume").addEventListener("click", () => subscribe(current.lastEventId));
  $("task-stop").addEventListener("click", stopStream);
  $("task-reply").addEventListener("click", () => {
    $("send-task-id").value = current.id;
    $("send-context-id").value = current.task ? current.task.contextId : "";
    location.hash = "#send";
  });
  $("push-form").addEventListener("submit", createPushConfig);
  window.addEventListener("hashchange", route);
  route();
  document.body.dataset.ready = "true";
}

start();
