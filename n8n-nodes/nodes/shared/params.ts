import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

/**
 * How one parameter is read for every item of an execution:
 * - `constant`: its raw value holds no expression, so n8n resolves it to the same value for every
 *   item; it is read once (through `getNodeParameter`, defaults and checks included) and reused.
 * - `field`: its raw value is exactly `={{ $json.<path> }}`, so its value is the item's field.
 * - `perItem`: anything else; n8n evaluates it for each item.
 */
type Plan =
	| { kind: 'constant'; read?: { value: unknown } }
	| { kind: 'field'; path: string[] }
	| { kind: 'perItem' };

const PER_ITEM: Plan = { kind: 'perItem' };

/**
 * Property names n8n's expression sandbox refuses to read (n8n-workflow's `isSafeObjectProperty`
 * list, and anything starting with `__`): an expression naming one is left to n8n, which fails it.
 */
const UNSAFE_KEYS = new Set([
	'prototype',
	'constructor',
	'getPrototypeOf',
	'setPrototypeOf',
	'getOwnPropertyDescriptor',
	'getOwnPropertyDescriptors',
	'defineProperty',
	'defineProperties',
	'mainModule',
	'binding',
	'_linkedBinding',
	'_load',
	'prepareStackTrace',
	'caller',
	'callee',
	'arguments',
	'getBuiltinModule',
	'dlopen',
	'execve',
	'loadEnvFile',
]);

const IDENTIFIER = /^\s*\.\s*([A-Za-z_$][\w$]*)/;
// A quoted key without escapes, quotes of its kind, braces or control characters.
const QUOTED_KEY = /^\s*\[\s*(?:"([^"\\{}\p{Cc}]*)"|'([^'\\{}\p{Cc}]*)')\s*\]/u;

/**
 * The field path of an expression that is exactly a reference to a field of the item:
 * `={{ $json.id }}`, `={{ $json["id"] }}`, `={{ $json.a.b }}`, `={{ $json['a b'].c }}`
 * (whitespace inside the braces allowed). Undefined for anything else (calls, operators, other
 * variables, text around the braces, a key n8n's sandbox refuses).
 */
export function simpleFieldPath(raw: unknown): string[] | undefined {
	if (typeof raw !== 'string') return undefined;
	const m = /^=\{\{\s*\$json(?![\w$])([\s\S]*?)\s*\}\}$/.exec(raw);
	if (!m) return undefined;
	let rest = m[1];
	const path: string[] = [];
	while (rest.length > 0) {
		const step = IDENTIFIER.exec(rest) ?? QUOTED_KEY.exec(rest);
		if (!step) return undefined;
		const key = step[1] ?? step[2] ?? '';
		if (UNSAFE_KEYS.has(key) || key.startsWith('__')) return undefined;
		path.push(key);
		rest = rest.slice(step[0].length);
	}
	return path.length > 0 ? path : undefined;
}

/** Whether a raw parameter value holds no expression anywhere (n8n gives it unchanged to every item). */
export function isConstantValue(raw: unknown): boolean {
	if (typeof raw === 'string') return raw.charAt(0) !== '=';
	if (raw === null || typeof raw !== 'object') return true;
	const values: unknown[] = Array.isArray(raw) ? raw : Object.values(raw);
	return values.every(isConstantValue);
}

function isPlainContainer(v: unknown): v is IDataObject {
	if (v === null || typeof v !== 'object') return false;
	if (Array.isArray(v)) return true;
	const proto = Object.getPrototypeOf(v) as unknown;
	return proto === Object.prototype || proto === null;
}

/**
 * The item's field at `path` when it is text, a number or a boolean (what n8n would give for the
 * reference too); undefined otherwise (missing, null, an object), which the caller leaves to n8n.
 */
function primitiveAt(json: unknown, path: string[]): string | number | boolean | undefined {
	let v: unknown = json;
	for (const key of path) {
		if (!isPlainContainer(v) || !Object.prototype.hasOwnProperty.call(v, key)) return undefined;
		v = v[key];
	}
	return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : undefined;
}

function rawParameter(parameters: IDataObject, name: string): unknown {
	let v: unknown = parameters;
	for (const key of name.split('.')) {
		if (v === null || typeof v !== 'object') return undefined;
		v = (v as IDataObject)[key];
	}
	return v;
}

/**
 * Reads a node's parameters for each input item, with n8n's results, without evaluating an
 * expression per item where none is needed. n8n's `getNodeParameter(name, itemIndex)` evaluates
 * an expression through its data proxy each time (costly: see BENCHMARKS.md), which dominates a node that
 * otherwise makes one batched call for all items. So:
 * - a parameter whose raw value holds no expression is read once, with n8n's `getNodeParameter`
 *   (its defaults, fallback and checks), and the value is reused for every item;
 * - a parameter that is exactly `={{ $json.<field path> }}` is read from the item's JSON when the
 *   field is text, a number or a boolean; otherwise (missing, null, an object or array) n8n
 *   evaluates it for that item, so errors and odd values come out as before;
 * - any other expression is evaluated by n8n for each item.
 * The values read once are shared by all items: callers must not modify them. A name is read with
 * one fallback value throughout an execution. This is exact only for parameters without a
 * `validateType` (n8n would check the evaluated value against it); the nodes here have none.
 */
export class ItemParameters {
	private readonly parameters: IDataObject;
	private readonly plans = new Map<string, Plan>();

	constructor(
		private readonly ctx: IExecuteFunctions,
		private readonly items: INodeExecutionData[],
	) {
		this.parameters = ctx.getNode().parameters as IDataObject;
	}

	/** The parameter's value for the item, as `getNodeParameter(name, itemIndex, fallback)` gives it. */
	get(name: string, itemIndex: number, fallback?: unknown): unknown {
		let plan = this.plans.get(name);
		if (!plan) {
			plan = planFor(rawParameter(this.parameters, name));
			this.plans.set(name, plan);
		}
		if (plan.kind === 'constant') {
			if (!plan.read) {
				try {
					plan.read = { value: this.read(name, itemIndex, fallback) };
				} catch {
					// A failure (no such parameter, a check n8n makes) is per item, as before: n8n
					// reads it again for this item (and throws the same) and for every later one.
					this.plans.set(name, PER_ITEM);
					return this.read(name, itemIndex, fallback);
				}
			}
			return plan.read.value;
		}
		if (plan.kind === 'field') {
			const v = primitiveAt(this.items[itemIndex]?.json, plan.path);
			if (v !== undefined) return v;
		}
		return this.read(name, itemIndex, fallback);
	}

	/** How the parameter is read (for tests and diagnostics). */
	planOf(name: string): Plan['kind'] {
		return (this.plans.get(name) ?? planFor(rawParameter(this.parameters, name))).kind;
	}

	private read(name: string, itemIndex: number, fallback: unknown): unknown {
		return this.ctx.getNodeParameter(name, itemIndex, fallback);
	}
}

function planFor(raw: unknown): Plan {
	if (isConstantValue(raw)) return { kind: 'constant' };
	const path = simpleFieldPath(raw);
	return path ? { kind: 'field', path } : PER_ITEM;
}
