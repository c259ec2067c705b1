// A fake n8n execution context for a node's unit tests: parameters resolved as n8n-core's
// getNodeParameter does (lodash get with the fallback, then n8n-workflow's expression engine).
const { Workflow, createEmptyRunExecutionData } = require('n8n-workflow');

/** An n8n workflow holding one node of `nodeType` (named `name`, of `type`) with these parameters, over `items`. */
function nodeContext(nodeType, name, type, parameters, items) {
	const nodeTypes = { getByNameAndVersion: () => nodeType, getByName: () => nodeType, getKnownTypes: () => ({}) };
	const node = { id: '1', name, type, typeVersion: 2, position: [0, 0], parameters };
	const workflow = new Workflow({ id: 'w', name: 'w', nodes: [node], connections: {}, active: false, nodeTypes });
	const calls = [];
	const ctx = {
		getNode: () => structuredClone(workflow.getNode(node.name)),
		getInputData: () => items,
		continueOnFail: () => false,
		getNodeParameter(param, itemIndex, fallback) {
			calls.push([param, itemIndex]);
			let value = workflow.getNode(node.name).parameters;
			for (const key of param.split('.')) value = value === null || typeof value !== 'object' ? undefined : value[key];
			if (value === undefined) value = fallback;
			if (value === undefined) throw new Error(`Could not get parameter "${param}"`);
			const n = workflow.getNode(node.name);
			return workflow.expression.getParameterValue(value, createEmptyRunExecutionData(), 0, itemIndex, n.name, items, 'manual', {}, {
				node: n,
				data: { main: [items] },
				source: null,
			});
		},
	};
	return { ctx, calls };
}

module.exports = { nodeContext };
