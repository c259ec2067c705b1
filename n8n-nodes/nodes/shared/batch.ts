import { coreField } from './errors';

/**
 * One flowguard call for a batch of entries (several items' work in one native call, one round
 * trip on Redis). The core checks every entry before it writes anything; when it refuses one
 * (ERR_INVALID_ARGUMENT naming `<list>[k]`), the entry owning index k fails alone (`refused`) and
 * the call runs again without it, so one bad item does not fail the others. Any other error is
 * the whole call's: `undefined` is returned after `failed` got it.
 */
export async function callBatch<E, R>(
	entries: E[],
	call: (entries: E[]) => Promise<R>,
	handlers: {
		refused: (entry: E, error: unknown) => void;
		failed: (entries: E[], error: unknown) => void;
		/** The entry that index k of the call's list belongs to (default: entry k). */
		entryOf?: (entries: E[], k: number) => number;
	},
): Promise<{ entries: E[]; result: R } | undefined> {
	let left = entries;
	while (left.length > 0) {
		try {
			return { entries: left, result: await call(left) };
		} catch (error) {
			const k = coreField(error)?.index;
			const at = k === undefined ? -1 : handlers.entryOf ? handlers.entryOf(left, k) : k;
			if (at < 0 || at >= left.length) {
				handlers.failed(left, error);
				return undefined;
			}
			handlers.refused(left[at], error);
			left = left.filter((_, j) => j !== at);
		}
	}
	return undefined;
}
