//! `tfdata read --deterministic` (issue 35) and `tfdata merge-checkpoints`.

use clap::Args;

/// Deterministic distributed_epoch reads: the same global sequence
/// whatever the workers do (docs/fault-tolerance.md, "Deterministic reads").
#[derive(Args, Default)]
#[command(next_help_heading = "Deterministic reads (--processing-mode distributed_epoch)")]
pub(crate) struct DeterministicArgs {
    /// Read in the global order of lanes; with --consumer-index and
    /// --num-consumers (which must divide --lanes), read this consumer's
    /// share of it.
    #[arg(long)]
    deterministic: bool,
    /// Lanes the epoch's splits are dealt to (1..=4096; the sequence
    /// depends on it).
    #[arg(long, requires = "deterministic", default_value_t = tfdata_client::Deterministic::default().lanes)]
    lanes: u32,
    /// Permute each epoch's splits with this seed before dealing them.
    #[arg(long, requires = "deterministic")]
    split_shuffle_seed: Option<u64>,
    /// Elements buffered across lanes beyond the merge point (default 4096).
    #[arg(long, requires = "deterministic")]
    reorder_window_elements: Option<usize>,
}

impl DeterministicArgs {
    /// The setting, for consumer `consumers` (index, count) if given.
    pub(crate) fn setting(
        &self,
        consumers: Option<(i64, i64)>,
    ) -> anyhow::Result<Option<tfdata_client::Deterministic>> {
        if !self.deterministic {
            return Ok(None);
        }
        let (c, n) = consumers.unwrap_or((0, 1));
        let index = u32::try_from(c)
            .map_err(|_| anyhow::anyhow!("--consumer-index must be >= 0, got {c}"))?;
        let count = u32::try_from(n)
            .map_err(|_| anyhow::anyhow!("--num-consumers must be >= 1, got {n}"))?;
        let mut d = tfdata_client::Deterministic {
            lanes: self.lanes,
            split_shuffle_seed: self.split_shuffle_seed,
            consumer_index: index,
            num_consumers: count,
            ..Default::default()
        };
        if let Some(elements) = self.reorder_window_elements {
            d.reorder_window_elements = elements;
        }
        Ok(Some(d))
    }
}

/// `tfdata merge-checkpoints OUT IN...`.
#[derive(Args)]
pub(crate) struct MergeArgs {
    /// Where to write the merged checkpoint file (restores on any consumer
    /// count that divides the lanes: give each consumer its own copy as
    /// --checkpoint-file).
    out: std::path::PathBuf,
    /// The --checkpoint-file of every consumer of one deterministic read,
    /// all written at the same step.
    #[arg(required = true)]
    inputs: Vec<std::path::PathBuf>,
}

/// Merges the consumers' checkpoint files (each: 8 bytes of elements
/// printed, then the reader checkpoint) into one whose count is their sum.
pub(crate) fn merge(args: &MergeArgs) -> anyhow::Result<()> {
    let mut printed = 0u64;
    let mut checkpoints = Vec::with_capacity(args.inputs.len());
    for path in &args.inputs {
        let bytes =
            std::fs::read(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let Some((count, checkpoint)) = bytes.split_first_chunk::<8>() else {
            anyhow::bail!("{} is not a checkpoint file (too short)", path.display());
        };
        printed += u64::from_le_bytes(*count);
        checkpoints.push(checkpoint.to_vec());
    }
    let slices: Vec<&[u8]> = checkpoints.iter().map(Vec::as_slice).collect();
    let merged = tfdata_client::merge_checkpoints(&slices)?;
    let tmp = args.out.with_extension("tmp");
    let mut file = printed.to_le_bytes().to_vec();
    file.extend_from_slice(&merged);
    std::fs::write(&tmp, file)?;
    std::fs::rename(&tmp, &args.out)?;
    eprintln!(
        "merged {} checkpoints into {}",
        args.inputs.len(),
        args.out.display()
    );
    Ok(())
}
