import type { IExecuteFunctions, RelatedExecution } from 'n8n-workflow';

function attempt<T>(f: () => T): T | undefined {
	try {
		return f();
	} catch {
		return undefined;
	}
}

/**
 * The execution that called this workflow through Execute Workflow, as n8n tells the
 * sub-workflow: the run data of a sub-execution holds `parentExecution` ({ executionId,
 * workflowId } of the caller, n8n 1.x and 2.x); n8n 2.x also gives the caller's execution id in
 * the execution context.
 */
export function parentExecution(ctx: IExecuteFunctions): { executionId: string; workflowId?: string } | undefined {
	const related = attempt(
		() => (ctx as { runExecutionData?: { parentExecution?: RelatedExecution } }).runExecutionData?.parentExecution,
	);
	const executionId = related?.executionId ?? attempt(() => ctx.getExecutionContext?.()?.parentExecutionId);
	if (!executionId) return undefined;
	return { executionId: String(executionId), ...(related?.workflowId ? { workflowId: String(related.workflowId) } : {}) };
}

/**
 * The Holder Label when none is given: the workflow and execution that took the lock. In a
 * helper sub-workflow (the lock-sub-workflow pattern) that is the workflow that called it, not the
 * helper: runs that find the lock held learn which run of which workflow holds it.
 */
export function defaultLabel(ctx: IExecuteFunctions): string {
	const wf = ctx.getWorkflow();
	const executionId = attempt(() => ctx.getExecutionId()) ?? '';
	const own = `${wf.name ?? wf.id ?? 'workflow'}${executionId ? ` (execution ${executionId})` : ''}`;
	const parent = parentExecution(ctx);
	if (!parent) return own;
	return `workflow ${parent.workflowId ?? '(unknown id)'} (execution ${parent.executionId}), through the sub-workflow ${own}`;
}
