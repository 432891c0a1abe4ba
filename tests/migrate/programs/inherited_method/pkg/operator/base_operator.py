class TrainingOperator:
  def register(self, *, model, optimizer, criterion, **kwargs):
    raise NotImplementedError
