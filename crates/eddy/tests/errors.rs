//! Bad input gets a clear error that names the operator and what is wrong, never a panic.

use eddy::prelude::*;

fn failure(env: &Env) -> String {
    env.execute("bad job").expect_err("the job must fail").to_string()
}

#[test]
fn parallelism_above_max_parallelism_names_the_operator() {
    let env = Env::new();
    env.set_parallelism(2).set_max_parallelism(4);
    env.from_sequence(0, 10).map(|x| x).name("doubler").set_parallelism(5).add_sink(CollectSink::new());
    let message = failure(&env);
    assert!(message.contains("operator 'doubler'") && message.contains("above its max parallelism 4"), "{message}");
}

#[test]
fn max_parallelism_out_of_bounds_is_rejected() {
    for bad in [0, 32_769] {
        let env = Env::new();
        env.set_max_parallelism(bad);
        env.from_sequence(0, 1).add_sink(CollectSink::new());
        let message = failure(&env);
        assert!(message.contains(&format!("max parallelism {bad} is out of bounds")), "{message}");
    }
}

#[derive(Clone, Default)]
struct DeclaresKeyedState;

impl RichFunction for DeclaresKeyedState {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        ctx.get_state(&ValueStateDescriptor::<u64>::new("counter"))?;
        Ok(())
    }
}

impl RichMapFunction<u64, u64> for DeclaresKeyedState {
    fn map(&mut self, value: u64) -> FunctionResult<u64> {
        Ok(value)
    }
}

#[test]
fn keyed_state_outside_a_keyed_context_fails_naming_operator_and_state() {
    let env = Env::new();
    env.set_parallelism(1);
    env.from_sequence(0, 10).rich_map(DeclaresKeyedState).name("not keyed").add_sink(CollectSink::new());
    let message = failure(&env);
    assert!(message.contains("operator 'not keyed' (subtask 1/1)"), "{message}");
    assert!(message.contains("keyed state 'counter' used outside a keyed context"), "{message}");
}

#[derive(Clone, Default)]
struct DeclaresTwice;

impl RichFunction for DeclaresTwice {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        ctx.get_state(&ValueStateDescriptor::<u64>::new("total"))?;
        ctx.get_state(&ValueStateDescriptor::<String>::new("total"))?;
        Ok(())
    }
}

impl KeyedProcessFunction<u64, u64, u64> for DeclaresTwice {
    fn process_element(
        &mut self,
        v: u64,
        _: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, u64>,
    ) -> FunctionResult {
        out.collect(v);
        Ok(())
    }
}

#[test]
fn a_state_declared_twice_with_different_types_fails_clearly() {
    let env = Env::new();
    env.set_parallelism(1);
    env.from_sequence(0, 10).key_by(|x: &u64| *x).process(DeclaresTwice).name("sum").add_sink(CollectSink::new());
    let message = failure(&env);
    assert!(message.contains("operator 'sum'"), "{message}");
    assert!(message.contains("state 'total' is declared twice with different types"), "{message}");
    assert!(message.contains("u64") && message.contains("String"), "{message}");
}

#[test]
fn a_missing_input_file_names_the_path() {
    let env = Env::new();
    env.set_parallelism(1);
    env.read_text_file("/no/such/input.txt").add_sink(CollectSink::new());
    let message = failure(&env);
    assert!(message.contains("cannot read text file source path '/no/such/input.txt'"), "{message}");
    assert!(message.contains("Text File Source"), "{message}");
}

#[test]
fn a_panic_in_a_user_function_names_operator_subtask_and_location() {
    let env = Env::new();
    env.set_parallelism(2);
    env.from_sequence(0, 100_000)
        .map(|x| {
            if x == 77_777 {
                panic!("record {x} is cursed");
            }
            x
        })
        .name("cursed map")
        .key_by(|x: &u64| *x)
        .map(|x| x)
        .add_sink(CollectSink::new());
    let error = env.execute("job").unwrap_err();
    // The index is 0-based like every subtask index; the message counts from 1, as Flink's.
    assert!(
        matches!(error, JobError::TaskFailed { subtask: 1, parallelism: 2, kind: FailureKind::UserCode, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    // 77_777 is in the second half of the sequence: subtask 2 of 2.
    assert!(message.contains("operator 'cursed map' (subtask 2/2)"), "{message}");
    assert!(message.contains("record 77777 is cursed") && message.contains("errors.rs"), "{message}");
}

#[derive(Clone)]
struct FailsOnKey(u64);

impl RichFunction for FailsOnKey {}

impl KeyedProcessFunction<u64, u64, u64> for FailsOnKey {
    fn process_element(
        &mut self,
        v: u64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, u64>,
    ) -> FunctionResult {
        if *ctx.current_key() == self.0 {
            return Err(format!("key {} is not allowed", self.0).into());
        }
        out.collect(v);
        Ok(())
    }
}

#[test]
fn an_error_returned_by_a_user_function_fails_the_job_with_it() {
    let env = Env::new();
    env.set_parallelism(3);
    env.from_sequence(0, 1_000)
        .key_by(|x: &u64| *x)
        .process(FailsOnKey(500))
        .name("validator")
        .add_sink(CollectSink::new());
    let message = failure(&env);
    assert!(message.contains("operator 'validator'") && message.contains("key 500 is not allowed"), "{message}");
}

#[test]
fn invalid_graphs_are_rejected_before_running() {
    let env = Env::new();
    env.set_parallelism(2);
    let s = env.from_sequence(0, 1);
    s.map(|x| x).uid("same").add_sink(CollectSink::new());
    s.map(|x| x).uid("same").add_sink(CollectSink::new());
    assert!(failure(&env).contains("uid 'same' is used by operator 'Map' and by operator 'Map'"));

    let env = Env::new();
    env.set_parallelism(2);
    env.from_sequence(0, 1).forward().map(|x| x).set_parallelism(3).add_sink(CollectSink::new());
    assert!(
        failure(&env).contains("forward partitioning from 'Sequence Source' (parallelism 2) to 'Map' (parallelism 3)")
    );

    let env = Env::new();
    env.from_collection(vec![1, 2]).set_parallelism(2).add_sink(CollectSink::new());
    assert!(failure(&env).contains("source 'Collection Source' is not parallel"));

    let env = Env::new();
    assert!(failure(&env).contains("no operators"));
}

/// Forgets to declare its state in `open()`.
#[derive(Clone, Default)]
struct ForgetsToDeclare {
    total: Option<ValueState<u64>>,
}

impl RichFunction for ForgetsToDeclare {}

impl KeyedProcessFunction<u64, u64, u64> for ForgetsToDeclare {
    fn process_element(
        &mut self,
        v: u64,
        _ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, u64>,
    ) -> FunctionResult {
        let total = self.total.declared("total")?;
        total.update(v)?;
        out.collect(v);
        Ok(())
    }
}

/// Issue 18: reading a state that was never declared gave only the user's own string.
#[test]
fn a_state_used_before_it_was_declared_names_the_state_and_the_operator() {
    let env = Env::new();
    env.set_parallelism(1);
    env.from_sequence(0, 10).key_by(|v: &u64| *v).process(ForgetsToDeclare::default()).name("summer");
    let message = failure(&env);
    assert!(message.contains("operator 'summer'"), "{message}");
    assert!(message.contains("state 'total' is used before it was declared"), "{message}");
}
