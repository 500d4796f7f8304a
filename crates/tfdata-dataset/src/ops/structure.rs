//! Ops that combine datasets or reshape elements: `zip`, `concatenate`,
//! `enumerate`.

use tfdata_core::{Element, Error, Result, Tensor};

use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};
use crate::{INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};

/// Combining datasets and structuring elements.
impl Dataset {
    /// `zip((self, others...))`: tuples of corresponding elements.
    pub fn zip(datasets: Vec<Dataset>) -> Dataset {
        Dataset::from_op(Zip { inputs: datasets })
    }

    /// `concatenate(other)`.
    pub fn concatenate(self, other: Dataset) -> Dataset {
        Dataset::from_op(Concatenate {
            first: self,
            second: other,
        })
    }

    /// `enumerate(start)`: `(index, element)` tuples.
    pub fn enumerate(self, start: i64) -> Dataset {
        Dataset::from_op(Enumerate { input: self, start })
    }
}

#[derive(Debug)]
pub struct Zip {
    pub inputs: Vec<Dataset>,
}

impl DatasetOp for Zip {
    fn name(&self) -> &'static str {
        "zip"
    }
    fn inputs(&self) -> Vec<Dataset> {
        self.inputs.clone()
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.inputs.is_empty() {
            return Err(Error::InvalidArgument(
                "zip: needs at least one dataset".into(),
            ));
        }
        let mut specs = Vec::with_capacity(self.inputs.len());
        for input in &self.inputs {
            match input.element_spec()? {
                Some(s) => specs.push(s),
                None => return Ok(None),
            }
        }
        Ok(Some(Structure::Tuple(specs)))
    }
    fn cardinality(&self) -> i64 {
        let cards: Vec<i64> = self.inputs.iter().map(Dataset::cardinality).collect();
        let finite: Vec<i64> = cards.iter().copied().filter(|&c| c >= 0).collect();
        if let Some(min) = finite.iter().min() {
            if cards.contains(&UNKNOWN_CARDINALITY) && *min > 0 {
                return UNKNOWN_CARDINALITY;
            }
            return *min;
        }
        if cards.contains(&UNKNOWN_CARDINALITY) {
            UNKNOWN_CARDINALITY
        } else {
            INFINITE_CARDINALITY
        }
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(ZipIter {
            inputs: self
                .inputs
                .iter()
                .map(|d| d.op.make_iterator(ctx))
                .collect::<Result<_>>()?,
        }))
    }
}

struct ZipIter {
    inputs: Vec<Box<dyn ElementIterator>>,
}

impl ElementIterator for ZipIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let mut zipped = Element::default();
        for input in &mut self.inputs {
            match input.next_element()? {
                Some(e) => {
                    zipped.components.extend(e.components);
                    zipped.lineage.extend(e.lineage);
                }
                None => return Ok(None),
            }
        }
        Ok(Some(zipped))
    }
}

#[derive(Debug)]
pub struct Concatenate {
    pub first: Dataset,
    pub second: Dataset,
}

impl DatasetOp for Concatenate {
    fn name(&self) -> &'static str {
        "concatenate"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.first.clone(), self.second.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        match (self.first.element_spec()?, self.second.element_spec()?) {
            (Some(a), Some(b)) => a.merge(&b).map(Some).map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("concatenate: {m}")),
                other => other,
            }),
            _ => Ok(None),
        }
    }
    fn cardinality(&self) -> i64 {
        match (self.first.cardinality(), self.second.cardinality()) {
            (INFINITE_CARDINALITY, _) | (_, INFINITE_CARDINALITY) => INFINITE_CARDINALITY,
            (UNKNOWN_CARDINALITY, _) | (_, UNKNOWN_CARDINALITY) => UNKNOWN_CARDINALITY,
            (a, b) => a.saturating_add(b),
        }
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(ConcatIter {
            first: Some(self.first.op.make_iterator(ctx)?),
            second: self.second.clone(),
            current_second: None,
            ctx: ctx.clone(),
        }))
    }
}

struct ConcatIter {
    first: Option<Box<dyn ElementIterator>>,
    second: Dataset,
    current_second: Option<Box<dyn ElementIterator>>,
    ctx: IterContext,
}

impl ElementIterator for ConcatIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if let Some(first) = &mut self.first {
            if let Some(e) = first.next_element()? {
                return Ok(Some(e));
            }
            self.first = None;
        }
        if self.current_second.is_none() {
            // The second input starts only when the first is done.
            self.current_second = Some(self.second.op.make_iterator(&self.ctx)?);
        }
        match &mut self.current_second {
            Some(second) => second.next_element(),
            None => Ok(None),
        }
    }
}

#[derive(Debug)]
pub struct Enumerate {
    pub input: Dataset,
    pub start: i64,
}

impl DatasetOp for Enumerate {
    fn name(&self) -> &'static str {
        "enumerate"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("start", self.start)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(self.input.element_spec()?.map(|s| {
            Structure::Tuple(vec![
                Structure::Tensor(TensorSpec::new(tfdata_core::DType::Int64, Shape::scalar())),
                s,
            ])
        }))
    }
    fn cardinality(&self) -> i64 {
        self.input.cardinality()
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(EnumerateIter {
            input: self.input.op.make_iterator(ctx)?,
            next: self.start,
        }))
    }
}

struct EnumerateIter {
    input: Box<dyn ElementIterator>,
    next: i64,
}

impl ElementIterator for EnumerateIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.input.next_element()? {
            Some(e) => {
                let mut components = Vec::with_capacity(e.components.len() + 1);
                components.push(Tensor::scalar(self.next));
                components.extend(e.components);
                self.next = self.next.wrapping_add(1);
                Ok(Some(Element::new(components).with_lineage(e.lineage)))
            }
            None => Ok(None),
        }
    }
}
