// The dashboard's behaviour: the overview refreshes itself from the JSON API, and
// the dead jobs page runs bulk actions batch by batch. DOM is built with
// createElement and textContent only, so data from the database stays inert.
"use strict";
(function () {
  const body = document.body;
  const root = body.dataset.root || "";
  const csrf = body.dataset.csrf || "";
  const POLL_MS = 3000, THROUGHPUT_EVERY = 5, DEPTH_POINTS = 200;

  function element(tag, words, attributes) {
    const made = document.createElement(tag);
    if (words !== undefined && words !== null) made.textContent = String(words);
    for (const [key, value] of Object.entries(attributes || {})) made.setAttribute(key, value);
    return made;
  }

  function row(cells) {
    const tr = element("tr");
    for (const cell of cells) tr.appendChild(cell instanceof Node ? cell : element("td", cell));
    return tr;
  }

  function link(href, words) {
    const td = element("td");
    td.appendChild(element("a", words, {href: href}));
    return td;
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    if (seconds < 120) return `${Math.round(seconds)}s`;
    if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
    return `${(seconds / 3600).toFixed(1)}h`;
  }

  async function getJson(path) {
    const answer = await fetch(root + path, {headers: {Accept: "application/json"}, credentials: "same-origin"});
    if (!answer.ok) throw new Error(`${path}: HTTP ${answer.status}`);
    return answer.json();
  }

  // -- overview ------------------------------------------------------------------------
  const depth = [];   // [{t: ms, total, queues: {name: n}}], one per poll

  function showQueues(queues) {
    const rows = queues.map((q) => row([
      link(`${root}/jobs?${new URLSearchParams({queue: q.queue})}`, q.queue),
      q.ready, q.delayed, q.reserved, q.dead, q.cancelled, q.done_last_hour, q.failed_last_hour,
      q.per_minute, age(q.oldest_ready_age_s), q.paused ? "paused" : "active"]));
    if (!rows.length) rows.push(row([element("td", "No jobs yet.", {colspan: "11"})]));
    document.getElementById("queue-rows").replaceChildren(...rows);
  }

  function showLimits(groups) {
    const rows = groups.map((g) => row([g.type, element("td", g.key || "(none)", {class: "key"}),
      g.running, g.limit === null ? "–" : g.limit, g.rate || "–", g.waiting]));
    if (!rows.length) rows.push(row([element("td", "No limited job is running or waiting.", {colspan: "6"})]));
    document.getElementById("limit-rows").replaceChildren(...rows);
  }

  function showSupervisors(supervisors) {
    const blocks = supervisors.map((sup) => {
      const block = element("div", null, {class: "supervisor"});
      const title = element("h3", `${sup.host} `);
      title.appendChild(element("span", `pid ${sup.pid}`, {class: "pid"}));
      if (sup.stale) title.appendChild(element("span", " stale", {class: "stale"}));
      block.appendChild(title);
      block.appendChild(element("p", `queues ${sup.queues.join(", ")} · ${sup.children.length}/${sup.workers} workers · heartbeat ${sup.heartbeat_age_s}s ago · since ${sup.started_at}`));
      const table = element("table");
      table.appendChild(row(["Worker", "Pid", "State", "Job", "Type", "Running for"].map((h) => element("th", h))));
      for (const child of sup.children) {
        table.appendChild(row([child.slot, child.pid, child.state,
          child.job_id ? link(`${root}/jobs/${encodeURIComponent(child.job_id)}`, child.job_id) : "",
          child.type || "", child.job_id ? `${child.seconds}s` : ""]));
      }
      block.appendChild(table);
      return block;
    });
    if (!blocks.length) blocks.push(element("p", "No supervisor is running."));
    document.getElementById("supervisors").replaceChildren(...blocks);
  }

  function showDepth(queues) {
    const sample = {t: Date.now(), total: 0};
    for (const q of queues) sample.total += q.ready + q.delayed + q.reserved;
    depth.push(sample);
    if (depth.length > DEPTH_POINTS) depth.shift();
    window.PQCharts.draw(document.getElementById("chart-depth"),
      [{name: "jobs waiting or running", cls: "depth", points: depth.map((s) => [s.t, s.total])}],
      depth[0].t, Math.max(sample.t, depth[0].t + POLL_MS));
  }

  // minutes: the range; bucket: minutes averaged per point (the day's 1,440 minutes
  // would be too dense to read).
  async function showThroughput(span, minutes, bucket) {
    const answer = await getJson(`/api/throughput?range=${span}`);
    const step = bucket * 60000;
    const to = Math.floor(Date.now() / step) * step, from = to - minutes * 60000;
    const sums = new Map();
    for (const point of answer.points) {
      const at = Math.floor(Date.parse(point.minute) / step) * step;
      const sum = sums.get(at) || {done: 0, failed: 0};
      sum.done += point.done;
      sum.failed += point.failed;
      sums.set(at, sum);
    }
    const done = [], failed = [];
    for (let t = from; t <= to; t += step) {
      const sum = sums.get(t) || {done: 0, failed: 0};
      done.push([t, Math.round(sum.done / bucket * 10) / 10]);
      failed.push([t, Math.round(sum.failed / bucket * 10) / 10]);
    }
    window.PQCharts.draw(document.getElementById(`chart-${span}`),
      [{name: "done", cls: "done", points: done}, {name: "failed", cls: "failed", points: failed}],
      from, to);
  }

  function startOverview() {
    let polls = 0;
    const updated = document.getElementById("updated");
    async function poll() {
      try {
        const answer = await getJson("/api/overview");
        showQueues(answer.queues);
        showLimits(answer.limits);
        showSupervisors(answer.supervisors);
        showDepth(answer.queues);
        if (polls % THROUGHPUT_EVERY === 0) {
          await showThroughput("hour", 60, 1);
          await showThroughput("day", 1440, 10);
        }
        updated.textContent = `as of ${answer.now}`;
        updated.classList.remove("offline");
      } catch (error) {
        updated.textContent = `not updated: ${error.message}`;
        updated.classList.add("offline");
      }
      polls += 1;
      window.setTimeout(poll, POLL_MS);
    }
    poll();
  }

  // -- dead jobs: bulk actions on everything matching the filter ------------------------------------
  function startDead() {
    const all = document.getElementById("select-all");
    if (all) {
      all.addEventListener("change", () => {
        for (const box of document.querySelectorAll("input.pick")) box.checked = all.checked;
      });
    }
    const bulk = document.getElementById("bulk");
    if (!bulk) return;
    const progress = document.getElementById("progress");
    const stop = document.getElementById("stop-all");
    const buttons = bulk.querySelectorAll("button[data-action]");
    let stopping = false;
    stop.addEventListener("click", () => { stopping = true; });

    async function run(action) {
      const filters = {};
      for (const [key, value] of Object.entries(bulk.dataset)) {
        if (key.startsWith("filter")) filters[key.slice(6).toLowerCase()] = value;
      }
      let after = "", changed = 0, seen = 0;
      stopping = false;
      stop.hidden = false;
      buttons.forEach((button) => { button.disabled = true; });
      try {
        for (;;) {
          const form = new URLSearchParams({...filters, action: action, after: after, csrf: csrf});
          const answer = await fetch(`${root}/api/dead/batch`, {method: "POST", body: form,
            credentials: "same-origin", headers: {"X-CSRF-Token": csrf}});
          const result = await answer.json();
          if (!answer.ok) throw new Error(result.error || `HTTP ${answer.status}`);
          changed += result.processed;
          seen += result.seen;
          progress.textContent = `${action}: ${changed} of ${seen} jobs so far…`;
          if (result.finished) { progress.textContent = `${action}: done, ${changed} jobs.`; break; }
          if (stopping) { progress.textContent = `${action}: stopped after ${changed} jobs.`; break; }
          after = String(result.next_after);
        }
      } catch (error) {
        progress.textContent = `${action} stopped: ${error.message} (${changed} jobs before)`;
      }
      stop.hidden = true;
      buttons.forEach((button) => { button.disabled = false; });
    }
    // Discarding everything that matches cannot be undone: the first click only arms
    // the button (no dialog: the page opens none), a second within 5 s runs it.
    let armed = null;
    buttons.forEach((button) => button.addEventListener("click", () => {
      const action = button.dataset.action;
      if (action === "discard" && armed !== button) {
        armed = button;
        progress.textContent = "Discard every dead job matching the filter, for good? Click again to confirm.";
        window.setTimeout(() => { if (armed === button) { armed = null; progress.textContent = ""; } }, 5000);
        return;
      }
      armed = null;
      run(action);
    }));
  }

  if (body.dataset.page === "overview") startOverview();
  if (body.dataset.page === "dead") startDead();
}());
