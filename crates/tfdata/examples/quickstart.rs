//! The seed example: a dispatcher, one worker, and `Dataset::range(10)` read
//! back through tf.data service in parallel_epochs mode. Logs go to stderr;
//! the last line of stdout is the list of elements.

use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};

fn main() -> Result<(), tfdata::Error> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TFDATA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
    let _worker = WorkerServer::new(WorkerConfig::new(dispatcher.address()))?;

    let dataset = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(10))?;
    let mut values = Vec::new();
    for element in dataset.iter()? {
        values.push(element?.components[0].to_scalar::<i64>()?);
    }
    println!("{values:?}");
    Ok(())
}
