// What changed between two revisions of an invoice, field by field and line by line (lines
// by position: their order is part of the sealed payload).

import * as fmt from "./format.js";

/** [{field, before, after}] for every difference; names maps ids to readable names. */
export function diffRevisions(before, after, names) {
  const changes = [];
  const add = (label, a, b) => {
    if (a !== b) changes.push({ field: label, before: a, after: b });
  };
  add("Customer", names.customer(before.customer_id), names.customer(after.customer_id));
  add("Destination", names.destination(before.payment_destination_id), names.destination(after.payment_destination_id));
  add("Currency", before.currency, after.currency);
  add("Due date", fmt.date(before.due_date), fmt.date(after.due_date));
  const count = Math.max(before.lines.length, after.lines.length);
  for (let i = 0; i < count; i++) {
    const a = before.lines[i];
    const b = after.lines[i];
    const label = `Line ${i + 1}`;
    if (!a) {
      changes.push({ field: label, before: "(none)", after: describeLine(b, after.currency) });
    } else if (!b) {
      changes.push({ field: label, before: describeLine(a, before.currency), after: "(removed)" });
    } else {
      add(`${label} description`, a.description, b.description);
      add(`${label} quantity`, fmt.quantity(a.quantity), fmt.quantity(b.quantity));
      add(`${label} unit amount`, fmt.money(a.unit_amount, before.currency), fmt.money(b.unit_amount, after.currency));
      add(`${label} amount`, fmt.money(a.amount, before.currency), fmt.money(b.amount, after.currency));
    }
  }
  const otherBefore = new Map(otherSealedFacts(before.canonical_payload));
  const otherAfter = new Map(otherSealedFacts(after.canonical_payload));
  for (const label of new Set([...otherBefore.keys(), ...otherAfter.keys()])) {
    add(label, otherBefore.get(label) ?? "(none)", otherAfter.get(label) ?? "(none)");
  }
  add("Total", fmt.money(before.total, before.currency), fmt.money(after.total, after.currency));
  add("Reasoning", before.reasoning, after.reasoning);
  return changes;
}

function describeLine(line, currency) {
  return `${line.description}: ${fmt.quantity(line.quantity)} × ${fmt.money(line.unit_amount, currency)} = ${fmt.money(line.amount, currency)}`;
}

// The canonical payload's members that the review shows in their own places.
const SHOWN = new Set(["currency", "customer_id", "destination", "due_date", "lines", "schema", "total_minor"]);

/**
 * [[label, text]] for every other member of a revision's canonical payload: whatever is sealed
 * the approver sees, so a sealed fact the console has no place for yet is listed as it is.
 */
export function otherSealedFacts(canonical) {
  let sealed;
  try {
    sealed = JSON.parse(canonical);
  } catch {
    return [];
  }
  return Object.entries(sealed ?? {})
    .filter(([key]) => !SHOWN.has(key))
    .map(([key, value]) => [
      key.charAt(0).toUpperCase() + key.slice(1).replaceAll("_", " "),
      typeof value === "string" ? value : JSON.stringify(value),
    ]);
}
