// A plain n8n execution context for a node's unit tests: parameters read by their dotted path
// with the fallback (no expressions; node-context.js resolves those), one node, no failure mode.

/** The context of node `name` (of `type`) with `parameters` over `items` (one empty item by default). */
function plainContext(name, type, parameters, items = [{ json: {} }]) {
	const get = (path, fallback) => {
		let v = parameters;
		for (const p of path.split('.')) v = v?.[p];
		return v === undefined ? fallback : v;
	};
	return {
		getInputData: () => items,
		getNodeParameter: (path, _i, fallback) => get(path, fallback),
		getNode: () => ({ id: '1', name, type, typeVersion: 1, parameters }),
		continueOnFail: () => false,
	};
}

module.exports = { plainContext };
