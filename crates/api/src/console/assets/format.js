// Formatting for people. Money is never a float here: amounts arrive as decimal strings with
// exactly the currency's decimals ("1200.00", "0.000000000000000001"), and are grouped as
// strings, digit by digit. (Intl.NumberFormat would turn "12345678901234567890.12" into a
// double first and print other digits.) Only the separators come from the reader's locale.

const locale = navigator.language || "en";

function separators() {
  try {
    const parts = new Intl.NumberFormat(locale).formatToParts(12345.6);
    const group = parts.find((p) => p.type === "group")?.value ?? ",";
    const decimal = parts.find((p) => p.type === "decimal")?.value ?? ".";
    return { group, decimal };
  } catch {
    return { group: ",", decimal: "." };
  }
}

const SEP = separators();

/** "1234567.50" → "1,234,567.50" (the reader's separators; groups of three). Anything that is
 * not a plain decimal string is shown as it came, so nothing is ever silently changed. */
export function groupDecimal(amount) {
  const text = String(amount);
  const match = /^(-?)([0-9]+)(?:\.([0-9]+))?$/.exec(text);
  if (!match) return text;
  const [, sign, whole, fraction] = match;
  let grouped = "";
  for (let i = 0; i < whole.length; i++) {
    if (i > 0 && (whole.length - i) % 3 === 0) grouped += SEP.group;
    grouped += whole[i];
  }
  return sign + grouped + (fraction !== undefined ? SEP.decimal + fraction : "");
}

/** "EUR 1,200.00": the currency code first, the same way for fiat and crypto. */
export function money(amount, currency) {
  return `${currency} ${groupDecimal(amount)}`;
}

/** A quantity is a decimal string too ("1.5"). */
export function quantity(q) {
  return groupDecimal(q);
}

/** "2030-01-31" → "31 Jan 2030" in the reader's locale, without a time zone shifting it. */
export function date(ymd) {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(ymd || "");
  if (!match) return ymd || "";
  const d = new Date(Date.UTC(+match[1], +match[2] - 1, +match[3]));
  return new Intl.DateTimeFormat(locale, {
    day: "numeric",
    month: "short",
    year: "numeric",
    timeZone: "UTC",
  }).format(d);
}

/** An RFC 3339 time in the reader's zone. */
export function dateTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "short" }).format(d);
}

/** How long ago: "just now", "5 min", "3 h", "2 d". */
export function age(iso, now = Date.now()) {
  const then = new Date(iso).getTime();
  if (Number.isNaN(then)) return "";
  const minutes = Math.max(0, Math.floor((now - then) / 60000));
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h`;
  return `${Math.floor(hours / 24)} d`;
}

/** An IBAN in groups of four, as printed on paper; other addresses exactly as they are. */
export function address(network, value) {
  if (network === "iban") return value.replace(/(.{4})(?=.)/g, "$1 ");
  return value;
}

const NETWORKS = {
  iban: "IBAN",
  bitcoin: "Bitcoin",
  ethereum: "Ethereum",
  arbitrum: "Arbitrum",
  base: "Base",
};

export function network(name) {
  return NETWORKS[name] || name;
}

/** "IBAN DE89 3704 …" or "USDC on Arbitrum 0x5aAe…": where the money goes, in one phrase. */
export function destinationPhrase(network_, currency, addr) {
  if (network_ === "iban") return `IBAN ${address(network_, addr)}`;
  return `${currency} on ${network(network_)} at ${addr}`;
}

const STATES = {
  draft: "Draft",
  pending_approval: "Pending approval",
  approved: "Approved",
  issued: "Issued",
  partially_paid: "Partially paid",
  paid: "Paid",
  rejected: "Rejected",
  cancelled: "Cancelled",
};

export function state(name) {
  return STATES[name] || name;
}

export const STATE_NAMES = Object.keys(STATES);

const DECISIONS = {
  approved: "Approved",
  rejected: "Rejected",
  changes_requested: "Changes requested",
};

export function decision(name) {
  return DECISIONS[name] || name;
}

const ACTIONS = {
  create_draft: "Drafted",
  revise: "Revised",
  submit: "Submitted for approval",
  withdraw: "Withdrawn",
  approve: "Approved",
  reject: "Rejected",
  request_changes: "Changes requested",
  cancel: "Cancelled",
  issue: "Issued",
  issue_blocked: "Issue blocked (destination inactive)",
  issue_rejected: "Issue rejected by the issuer",
  issue_conflict: "Issue conflict (the issuer holds another request)",
  issue_needs_review: "Issue needs review (the issuer forgot the key)",
  payment_applied: "Payment applied",
  payment_reversed: "Payment reversed",
};

const ISSUING = {
  pending: "Issuing pending",
  blocked: "Issuing blocked",
  rejected: "Rejected by the issuer",
  conflict: "Conflict with the issuer",
  needs_review: "Needs review",
};

/** Where issuing an approved invoice stands (`invoice.issuing.status`). */
export function issuing(status) {
  return ISSUING[status] || status;
}

export function action(name) {
  return ACTIONS[name] || name;
}

/** The first characters of a hash or id, for tables; the whole value is always one click away. */
export function short(value, n = 12) {
  return value && value.length > n ? `${value.slice(0, n)}…` : value || "";
}

const PAYMENT_STATUSES = {
  pending: "Pending",
  applied: "Applied",
  overpaid: "Overpaid",
  unmatched: "Unmatched",
  conflict: "Conflict",
  failed: "Failed",
};

export function paymentStatus(name) {
  return PAYMENT_STATUSES[name] || name;
}

const PAYMENT_STATES = { observed: "Observed", confirmed: "Confirmed", failed: "Failed" };

export function paymentState(name) {
  return PAYMENT_STATES[name] || name;
}

const UNMATCHED = {
  unknown_invoice: "No invoice here has the id or number it names.",
  wrong_currency: "The invoice it names is in another currency.",
  invoice_not_issued: "The invoice it names is not issued yet: it is matched when it is.",
};

export function unmatchedReason(name) {
  return UNMATCHED[name] || name || "";
}

const JOB_STATES = {
  available: "Available",
  scheduled: "Scheduled",
  running: "Running",
  retryable: "Retryable",
  completed: "Completed",
  discarded: "Discarded",
  cancelled: "Cancelled",
};

export function jobState(name) {
  return JOB_STATES[name] || name;
}

export const JOB_STATE_NAMES = Object.keys(JOB_STATES);

const JOB_KINDS = {
  "invoice.issue.v1": "Issuing an invoice",
  "webhook.deliver.v1": "Webhook delivery",
};

/** A job kind for people; the versioned name stays visible next to it. */
export function jobKind(name) {
  return JOB_KINDS[name] || name;
}

export const JOB_KIND_NAMES = Object.keys(JOB_KINDS);
