// Jobs: the organisation's queue (GET /v1/jobs?state=&kind=, approvers), one job with its
// attempts, last error and next run (GET /v1/jobs/{id}), and the two things a human may do
// with one: run it again (POST …/retry) or stop it before it runs (POST …/cancel).

import { api, ApiError, describe } from "./api.js";
import { h, replace, notice, table, filterNav, pager, facts, announce } from "./dom.js";
import * as fmt from "./format.js";

const PAGE_SIZE = 25;
const WAITING = new Set(["available", "scheduled", "retryable"]);

/** "Attempt 3 of 25". */
function attempts(job) {
  return `${job.attempt} of ${job.max_attempts}`;
}

function nextRun(job) {
  return WAITING.has(job.state) ? fmt.dateTime(job.run_at) : "";
}

export async function render(main, context) {
  if (context.args[0]) return renderOne(main, context.args[0], context);
  return renderList(main, context);
}

async function renderList(main, { params }) {
  const state = fmt.JOB_STATE_NAMES.includes(params.get("state")) ? params.get("state") : "all";
  const kind = fmt.JOB_KIND_NAMES.includes(params.get("kind")) ? params.get("kind") : "all";
  const cursor = params.get("cursor");
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (state !== "all") query.set("state", state);
  if (kind !== "all") query.set("kind", kind);
  if (cursor) query.set("cursor", cursor);
  const page = await api("GET", `/v1/jobs?${query}`);
  const hash = (s, k) => {
    const q = new URLSearchParams();
    if (s !== "all") q.set("state", s);
    if (k !== "all") q.set("kind", k);
    const text = q.toString();
    return text ? `#/jobs?${text}` : "#/jobs";
  };

  const rows = page.items.map((job) => ({
    dataset: { jobId: job.id },
    cells: [
      h("a", { href: `#/jobs/${job.id}`, class: "row-link" }, fmt.jobKind(job.kind)),
      h("span", { class: `badge job-${job.state}` }, fmt.jobState(job.state)),
      { value: attempts(job), class: "num" },
      { value: nextRun(job), class: "num" },
      job.last_error ? h("span", { class: "mono" }, job.last_error.code) : "",
      { value: h("time", { datetime: job.created_at, title: fmt.dateTime(job.created_at) }, fmt.age(job.created_at)), class: "num" },
    ],
  }));

  replace(
    main,
    h("h1", {}, "Jobs"),
    filterNav(
      "Job states",
      ["all", ...fmt.JOB_STATE_NAMES].map((s) => [s, s === "all" ? "All states" : fmt.jobState(s), hash(s, kind)]),
      state,
    ),
    filterNav(
      "Job kinds",
      ["all", ...fmt.JOB_KIND_NAMES].map((k) => [k, k === "all" ? "All kinds" : fmt.jobKind(k), hash(state, k)]),
      kind,
    ),
    h(
      "p",
      { class: "lede" },
      "What Tauros does in the background: issuing approved invoices and delivering webhooks. Discarded jobs need a human: open one to retry it.",
    ),
    rows.length
      ? table(
          "Jobs, newest first",
          [
            { label: "Kind" },
            { label: "State" },
            { label: "Attempt", class: "num" },
            { label: "Next run", class: "num" },
            { label: "Last error" },
            { label: "Age", class: "num" },
          ],
          rows,
          { class: "jobs", rowHeader: true },
        )
      : h("p", { class: "empty" }, "No jobs here."),
    pager(hash(state, kind), cursor, page.next_cursor),
  );
  return null;
}

/** A 409 from retry or cancel, in plain words. */
function refusal(e, action) {
  if (e instanceof ApiError && e.code === "job_running") {
    return `A worker is running this job right now, so it cannot be ${action === "retry" ? "retried" : "cancelled"}: its effect may be under way. Wait for this attempt to end and look again. (job_running)`;
  }
  if (e instanceof ApiError && e.code === "issue_in_progress") {
    return "This invoice is being issued: its claim is processing, so the peer may already hold it, and cancelling the job would leave that effect with no one to finish it. Retry the job instead: it asks the peer first and then finishes. (issue_in_progress)";
  }
  if (e instanceof ApiError && e.code === "job_finished") {
    return action === "retry"
      ? "This job completed: it will not run again. (job_finished)"
      : "This job has already finished (completed or discarded): there is nothing left to cancel. (job_finished)";
  }
  return describe(e);
}

async function renderOne(main, id, context) {
  async function draw(flash) {
    const job = await api("GET", `/v1/jobs/${id}`);
    const message = h("div", { id: "job-message" });
    const retry = h("button", { type: "button", class: "btn btn-primary", id: "job-retry" }, "Retry now");
    const cancel = h("button", { type: "button", class: "btn btn-danger", id: "job-cancel" }, "Cancel job");
    let busy = false;
    const act = (action) => async () => {
      if (busy) return;
      busy = true;
      retry.disabled = true;
      cancel.disabled = true;
      replace(message);
      try {
        const answer = await api("POST", `/v1/jobs/${id}/${action}`);
        const text =
          action === "retry"
            ? `Sent to run again: the job is ${fmt.jobState(answer.state).toLowerCase()}.`
            : `Cancelled: the job will not run.`;
        await draw(notice("ok", h("p", { id: "job-flash" }, text)));
        announce(text);
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return;
        // The job may have moved on: show it as it is now, with the refusal above it.
        const text = refusal(e, action);
        try {
          await draw(notice("error", h("p", { id: "job-flash" }, text)));
        } catch {
          replace(message, notice("error", text));
          busy = false;
          retry.disabled = false;
          cancel.disabled = false;
        }
        announce(text);
      }
    };
    retry.addEventListener("click", act("retry"));
    cancel.addEventListener("click", act("cancel"));

    const err = job.last_error;
    replace(
      main,
      h("p", { class: "crumbs" }, h("a", { href: "#/jobs" }, "← Jobs")),
      h("h1", {}, `${fmt.jobKind(job.kind)} job`),
      flash || null,
      h(
        "section",
        { class: "card", "aria-labelledby": "job-h" },
        h("h2", { id: "job-h" }, "The job"),
        facts([
          ["State", h("span", { class: `badge job-${job.state}`, id: "job-state" }, fmt.jobState(job.state))],
          ["Kind", h("span", { class: "mono" }, job.kind)],
          ["Attempt", attempts(job), { id: "job-attempt", class: "num-inline" }],
          ["Executions", `${job.executions} (${job.interruptions} interrupted)`, { class: "num-inline" }],
          ["Next run", WAITING.has(job.state) ? fmt.dateTime(job.run_at) : null, { id: "job-next-run", class: "num-inline" }],
          ["Lease expires", job.lease_expires_at ? fmt.dateTime(job.lease_expires_at) : null],
          ["Worker", job.worker ? h("span", { class: "mono" }, job.worker) : null],
          ["Last error", err ? [h("span", { class: "mono" }, err.code), ": ", err.message] : "none", { id: "job-last-error" }],
          ["Created", fmt.dateTime(job.created_at)],
          ["Last started", job.started_at ? fmt.dateTime(job.started_at) : null],
          ["Finished", job.finished_at ? fmt.dateTime(job.finished_at) : null],
          ["Submission id", job.submission_id ? h("span", { class: "mono" }, job.submission_id) : null],
        ]),
        h("details", {}, h("summary", {}, "Arguments"), h("pre", { class: "canonical" }, JSON.stringify(job.args, null, 2))),
      ),
      h(
        "section",
        { class: "card decide", "aria-labelledby": "job-act-h" },
        h("h2", { id: "job-act-h" }, "Act on it"),
        h(
          "p",
          { class: "hint" },
          "Retry runs it now: a discarded or cancelled job starts over at attempt 1, a waiting one keeps its attempt. Cancel stops a job that has not started. Neither works while a worker runs it, and a completed job never runs again.",
        ),
        h("div", { class: "actions" }, retry, cancel),
        message,
      ),
    );
    if (flash) context.focusHeading();
  }
  await draw(null);
  return null;
}
